import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { DEV_IMAGE } from '../../../../src/sandbox/profiles.js'
import { kernelProcessId, runKernelCode } from '../../../../src/sandbox/code/index.js'
import type { RunCodeRequest } from '../../../../src/sandbox/code/index.js'
import type { Sandbox } from '../../../../src/sandbox/types.js'
import { dockerFixture, rejectionOf } from '../../../support/docker-fixture.js'

const fx = dockerFixture()
let sb: Sandbox
const py = (code: string, more: Partial<RunCodeRequest> = {}) =>
  runKernelCode(sb, { code, language: 'python', timeoutMs: 20_000, ...more })
const js = (code: string, more: Partial<RunCodeRequest> = {}) =>
  runKernelCode(sb, { code, language: 'javascript', timeoutMs: 20_000, ...more })

beforeAll(async () => {
  sb = await fx.create({ image: DEV_IMAGE, network: 'none' })
}, 120_000)
afterAll(async () => {
  await sb?.close()
  expect(await fx.cleanup()).toBe(0)
})

describe('python kernel on docker (dev image)', () => {
  test('state persists between cells; the last value is the result text', async () => {
    const first = await py('import math\nx = 41\ndef inc(v):\n    return v + 1')
    expect(first.error).toBeNull()
    expect(first.text).toBeNull()
    const r = await py('print("hi", flush=True)\ninc(x) + math.floor(0.5)')
    expect(r).toMatchObject({ stdout: 'hi\n', text: '42', error: null, kernelRestarted: false })
    expect(r.executionCount).toBe(first.executionCount + 1)
  })

  test('stdout of a subprocess and input() cannot break the protocol', async () => {
    const r = await py(
      'import os, subprocess, sys\nsubprocess.run(["echo", "\\x1e{\\"id\\": 1}"])\nos.write(1, b"raw\\n")\nprint("err", file=sys.stderr)\ntry:\n    input()\nexcept EOFError:\n    print("eof")',
    )
    expect(r.error).toBeNull()
    expect(r.stdout).toBe('\x1e{"id": 1}\nraw\neof\n')
    expect(r.stderr).toBe('err\n')
  })

  test('an exception carries name, value and traceback; state survives', async () => {
    const r = await py('y = 1\n1 / 0')
    expect(r.error).toMatchObject({ name: 'ZeroDivisionError', value: 'division by zero' })
    expect(r.error?.traceback).toContain('ZeroDivisionError')
    expect((await py('y')).text).toBe('1')
  })

  test('rich outputs through display() and _repr_*_ methods', async () => {
    const r = await py(
      [
        'import base64',
        'class Img:',
        '    def _repr_png_(self):',
        '        return base64.b64decode("iVBORw0KGgo=")',
        'class Page:',
        '    def _repr_html_(self):',
        '        return "<b>hi</b>"',
        'display(Img())',
        'Page()',
      ].join('\n'),
    )
    expect(r.error).toBeNull()
    expect(r.outputs[0]).toMatchObject({ type: 'display', data: { 'image/png': 'iVBORw0KGgo=' } })
    expect(r.outputs[1]).toMatchObject({ type: 'result', data: { 'text/html': '<b>hi</b>' } })
  })

  test('a timeout interrupts the cell and keeps the state', async () => {
    await py('kept = "yes"')
    const r = await py('import time\nprint("before", flush=True)\ntime.sleep(30)', { timeoutMs: 1_000 })
    expect(r).toMatchObject({ timedOut: true, stdout: 'before\n', error: { name: 'TimeoutError' } })
    expect(r.durationMs).toBeLessThan(10_000)
    expect(await py('kept')).toMatchObject({ text: "'yes'", kernelRestarted: false })
  })

  test('a crashed kernel is reported, and the next call restarts it', async () => {
    await py('lost = 1')
    const r = await py('import os\nos._exit(3)')
    expect(r.error?.name).toBe('KernelDied')
    expect(r.error?.value).toContain('exited with code 3')
    const next = await py('"lost" in globals()')
    expect(next).toMatchObject({ text: 'False', kernelRestarted: true, error: null })
  })

  test('the kernel is a visible background process of the sandbox', async () => {
    const list = await sb.processes!.list()
    expect(list.map((p) => p.id)).toContain(kernelProcessId('python'))
  })

  test('per-cell env', async () => {
    const r = await py('import os\nos.environ.get("CELL_VAR")', { env: { CELL_VAR: 'v1' } })
    expect(r.text).toBe("'v1'")
    expect((await py('import os\nos.environ.get("CELL_VAR")')).text).toBeNull()
  })

  test('empty code is a clear error', async () => {
    expect(String(await rejectionOf(py('  ')))).toContain('code is empty')
  })
})

describe('javascript kernel on docker (dev image)', () => {
  test('globals persist, console is captured, last value is the result', async () => {
    await js('var counter = 10; function add(a) { return counter + a }')
    const r = await js('console.log("hello"); console.error("warn"); add(5)')
    expect(r).toMatchObject({ stdout: 'hello\n', stderr: 'warn\n', text: '15', error: null })
  })

  test('errors, timeouts, display', async () => {
    const e = await js('null.x')
    expect(e.error).toMatchObject({ name: 'TypeError' })
    const t = await js('while (true) {}', { timeoutMs: 500 })
    expect(t).toMatchObject({ timedOut: true, error: { name: 'TimeoutError' } })
    expect((await js('counter')).text).toBe('10')
    const d = await js('display({ _repr_html_: () => "<i>x</i>" }); 1')
    expect(d.outputs[0]).toMatchObject({ type: 'display', data: { 'text/html': '<i>x</i>' } })
  })

  test('top-level await', async () => {
    const r = await js('await new Promise((r) => setTimeout(r, 10)); console.log("done")')
    expect(r).toMatchObject({ stdout: 'done\n', error: null })
  })
})

test('an image without python is UNSUPPORTED with a fix', async () => {
  const bare = await fx.create({ network: 'none' })
  try {
    const err = await rejectionOf(runKernelCode(bare, { code: '1', language: 'python', timeoutMs: 5_000 }))
    expect(err).toMatchObject({ code: 'UNSUPPORTED' })
    expect(String(err)).toContain('python3 is not installed')
  } finally {
    await bare.close()
  }
}, 60_000)
