import { Sandbox as CodeSandbox } from '@e2b/code-interpreter'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { requireCode } from '../../../src/sandbox/code/index.js'
import { DEV_IMAGE } from '../../../src/sandbox/profiles.js'
import type { Sandbox } from '../../../src/sandbox/types.js'
import { type FakeE2B, startFakeE2B } from '../../fakes/e2b/index.js'
import { e2bFixture } from '../e2b/fixtures.js'

/*
 * E2B's code interpreter against the fake: the fake's /execute (the shared module over the
 * service's kernel in the fake sandbox's container) as the pinned `@e2b/code-interpreter` SDK calls
 * it, and the E2B provider's `code` capability on top of that SDK.
 */
let fake: FakeE2B
let fx: ReturnType<typeof e2bFixture>
let sb: Sandbox

beforeAll(async () => {
  fake = await startFakeE2B({ image: DEV_IMAGE })
  fx = e2bFixture(fake)
  sb = await fx.create()
}, 120_000)
afterAll(async () => {
  await sb?.close()
  expect(await fx?.cleanup()).toBe(0)
  await fake?.close()
})

describe('E2B code interpreter (fake)', () => {
  test('the SDK runCode: state, logs, results, errors, js', async () => {
    const s = await CodeSandbox.connect(sb.ref.id, {
      apiKey: fake.apiKey,
      apiUrl: fake.apiUrl,
      sandboxUrl: fake.sandboxUrl,
    })
    await s.runCode('base = 40')
    const e = await s.runCode('print("x")\nbase + 2')
    expect(e.text).toBe('42')
    expect(e.logs.stdout).toEqual(['x\n'])
    const err = await s.runCode('raise KeyError("k")')
    expect(err.error).toMatchObject({ name: 'KeyError' })
    expect((await s.runCode('[1,2].map((v) => v * 2)', { language: 'js' })).text).toBe('[ 2, 4 ]')
  })

  test('the provider: code capability keeps state; the kernel restarts after a crash', async () => {
    const code = requireCode(sb)
    expect(await code.languages()).toEqual(['python', 'javascript'])
    const run = (c: string) => code.run({ code: c, language: 'python', timeoutMs: 20_000 })
    await run('z = "kept"')
    expect(await run('z')).toMatchObject({ text: "'kept'", error: null })
    const html = await run('class H:\n    def _repr_html_(self):\n        return "<b/>"\nH()')
    expect(html.outputs[0]).toMatchObject({ type: 'result', data: { 'text/html': '<b/>' } })
    const crash = await run('import os\nos._exit(2)')
    expect(crash.error?.name).toBe('KernelDied')
    expect(await run('"z" in globals()')).toMatchObject({ text: 'False' })
  })
})
