import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import type { ConfigInput } from '../../src/config/schema.js'
import {
  configDir,
  fleetConfig,
  removeScope,
  runSbx,
  startSbxServer,
  startSbxWorker,
  uniqueName,
} from '../support/sbx-cli.js'
import type { LineChild, SbxServer } from '../support/sbx-cli.js'

/*
 * Issue 13, "a built-in interceptor that routes code tools the way routeShellTools routes shell
 * tools": config `routing.code` puts `routeCodeTools` in the server's host chain, and
 * `POST /v1/tool-calls` of `python` / `run_code` runs the cell in the session's kernel through the
 * job queue, in `sbx serve` and in a fleet (`sbx api` + `sbx worker`).
 */

interface ToolCallBody {
  decision: { kind: string; run?: { kind: string; language: string } }
  output?: string
  outcome?: string
  result?: {
    exitCode: number | null
    stdout: string
    code?: { text: string | null; error: { name: string } | null; executionCount: number }
  }
  job?: { id: string; state: string }
}

const json = async <T>(res: Response, status = 200): Promise<T> => {
  const body = await res.text()
  expect(res.status, body).toBe(status)
  return JSON.parse(body) as T
}

const callOf =
  (srv: () => SbxServer) =>
  async (name: string, args: unknown, sessionId: string): Promise<ToolCallBody> =>
    json<ToolCallBody>(await srv().post('/v1/tool-calls', { name, arguments: args, sessionId }))

const CODE_ROUTING = { code: { providerId: 'docker', profile: 'dev' } } as const

describe('routed code tools through sbx serve (routing.code on the dev profile)', () => {
  const scope = uniqueName('routecode')
  let srv: SbxServer
  let bare: SbxServer
  const call = callOf(() => srv)

  beforeAll(async () => {
    ;[srv, bare] = await Promise.all([
      startSbxServer('serve', { config: { queue: { prefix: scope }, routing: CODE_ROUTING } }),
      // Code tools routed to the busybox `default` profile: no interpreter there.
      startSbxServer('serve', {
        config: {
          queue: { prefix: `${scope}-bare` },
          routing: { code: { providerId: 'docker', profile: 'default' } },
        },
      }),
    ])
  }, 180_000)

  afterAll(async () => {
    await Promise.allSettled([srv?.stop(), bare?.stop()])
    await Promise.all([removeScope(scope), removeScope(`${scope}-bare`)])
  }, 60_000)

  test('state persists between routed cells: x = 20, then x + 22 is 42', async () => {
    const first = await call('python', { code: 'x = 20' }, 'nb')
    expect(first).toMatchObject({
      decision: { kind: 'routeTo', run: { kind: 'code', language: 'python' } },
      outcome: 'ok',
      job: { state: 'completed' },
    })
    expect(first.output).toBe('stdout:\n(empty)\nstderr:\n(empty)')
    const second = await call('python', { code: 'print("sum")\nx + 22' }, 'nb')
    expect(second.output).toBe('stdout:\nsum\nstderr:\n(empty)\nOut: 42')
    expect(second.result).toMatchObject({ exitCode: 0, code: { text: '42', error: null, executionCount: 2 } })
    // run_code and a bare JSON string reach the same kernel.
    const third = await call('run_code', JSON.stringify('x * 2'), 'nb')
    expect(third.output).toContain('Out: 40')
    // The session the tool call made is the API's session: POST /v1/sessions/{id}/code shares the kernel.
    const api = await json<{ text: string }>(await srv.post('/v1/sessions/nb/code', { code: 'x' }))
    expect(api.text).toBe('20')
  }, 120_000)

  test('an exception is a completed cell whose text carries the traceback', async () => {
    const r = await call('python', { code: 'def f():\n    return 1 / 0\nf()' }, 'nb-err')
    expect(r.outcome).toBe('ok')
    expect(r.job?.state).toBe('completed')
    expect(r.result).toMatchObject({ exitCode: 1, code: { error: { name: 'ZeroDivisionError' } } })
    expect(r.output).toMatch(
      /^stdout:\n\(empty\)\nstderr:\n\(empty\)\nexception: ZeroDivisionError: division by zero\ntraceback:\nTraceback \(most recent call last\):\n[\s\S]*in f\n[\s\S]*ZeroDivisionError: division by zero$/,
    )
    // The kernel lives on after the exception.
    expect((await call('python', { code: '"alive"' }, 'nb-err')).output).toContain("Out: 'alive'")
  }, 120_000)

  test('javascript by the language argument; no code is blocked with a reason', async () => {
    const js = await call('run_code', { code: 'const y = 2; y * 21', language: 'javascript' }, 'nb-js')
    expect(js.decision.run).toEqual({ kind: 'code', language: 'javascript' })
    expect(js.output).toContain('Out: 42')
    const none = await call('python', { command: 'ls' }, 'nb-js')
    expect(none).toMatchObject({ decision: { kind: 'block' }, outcome: 'blocked' })
    expect(none.output).toBe(
      'blocked: tool "python" needs code to run: pass arguments like {"code": "print(1 + 1)"}',
    )
  }, 120_000)

  test('a profile without the interpreter answers UNSUPPORTED, never runs the cell as a command', async () => {
    const r = await callOf(() => bare)('python', { code: 'print(1)' }, 'nb-bare')
    expect(r.outcome).toBe('error')
    expect(r.job?.state).toBe('failed')
    expect(r.output).toMatch(/^error: UNSUPPORTED: .*python3.*'dev' profile/)
  }, 120_000)

  test('sbx config check shows the code routing and refuses a profile that does not exist', async () => {
    const ok = await runSbx(['config', 'check', '--json'], { cwd: configDir({ routing: CODE_ROUTING }) })
    expect(ok.code, ok.stderr).toBe(0)
    expect(JSON.parse(ok.stdout)).toMatchObject({
      routing: { shell: 'docker/default', code: expect.stringMatching(/^docker\/dev \(python, run_code/) },
    })
    const bad = await runSbx(['config', 'check'], {
      cwd: configDir({ routing: { code: { providerId: 'docker', profile: 'notebook' } } } as ConfigInput),
    })
    expect(bad.code).not.toBe(0)
    expect(bad.stderr).toContain('at "routing.code": profile "notebook" is not defined')
  }, 60_000)
})

describe('routed code tools through sbx api + sbx worker', () => {
  const scope = uniqueName('routecodefleet')
  let api: SbxServer
  let worker: LineChild
  const call = callOf(() => api)

  beforeAll(async () => {
    const config = fleetConfig(scope, { routing: CODE_ROUTING })
    const key = `sbx_test_${uniqueName('k').replace(/-/g, '')}`
    ;[api, worker] = await Promise.all([
      startSbxServer('api', { config, env: { SBX_API_KEY: key } }),
      startSbxWorker({ config }),
    ])
  }, 180_000)

  afterAll(async () => {
    await Promise.allSettled([api?.stop(), worker?.stop()])
    await removeScope(scope)
  }, 60_000)

  test('the cells run on the worker, keep their state and report exceptions', async () => {
    const first = await call('python', { code: 'x = 20' }, 'nb')
    expect(first.job?.state).toBe('completed')
    expect((await call('python', { code: 'x + 22' }, 'nb')).output).toBe(
      'stdout:\n(empty)\nstderr:\n(empty)\nOut: 42',
    )
    const err = await call('python', { code: 'raise ValueError("nope")' }, 'nb')
    expect(err.output).toMatch(/exception: ValueError: nope\ntraceback:\nTraceback[\s\S]*ValueError: nope$/)
  }, 120_000)
})
