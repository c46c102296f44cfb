import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { fleetConfig, removeScope, startSbxServer, startSbxWorker, uniqueName } from '../support/sbx-cli.js'
import type { LineChild, SbxServer } from '../support/sbx-cli.js'

interface CodeResult {
  stdout: string
  stderr: string
  text: string | null
  outputs: { type: string; data: Record<string, string> }[]
  error: { name: string; value: string; traceback: string } | null
  timedOut: boolean
  kernelRestarted: boolean
  executionCount: number
}
interface ToolResult {
  isError?: boolean
  content: { type: string; text?: string; data?: string; mimeType?: string }[]
}

const json = async <T>(res: Response, status = 200): Promise<T> => {
  const body = await res.text()
  expect(res.status, body).toBe(status)
  return JSON.parse(body) as T
}

/*
 * Issue 13, "a code interpreter": POST /v1/sessions/{id}/code and the MCP run_code tool through
 * `node bin/sbx.js serve`, in sessions on the built-in dev profile (python3 and node).
 */
describe('the code interpreter through sbx serve', () => {
  const scope = uniqueName('code')
  let srv: SbxServer
  let client: Client

  beforeAll(async () => {
    srv = await startSbxServer('serve', {
      config: { queue: { prefix: scope }, routing: { shell: { providerId: 'docker', profile: 'dev' } } },
    })
    const transport = new StreamableHTTPClientTransport(new URL(`${srv.url}/mcp`), {
      requestInit: { headers: { authorization: `Bearer ${srv.key}` } },
    })
    client = new Client({ name: 'e2e-code', version: '1.0.0' })
    await client.connect(transport)
  }, 180_000)

  afterAll(async () => {
    await client?.close().catch(() => undefined)
    await srv?.stop()
    await removeScope(scope)
  }, 60_000)

  const session = async (): Promise<string> => {
    const sid = uniqueName('s')
    await json(await srv.post('/v1/sessions', { id: sid, provider: 'docker', profile: 'dev' }), 201)
    return sid
  }

  test('HTTP: state persists, errors, rich output, timeout keeps state, crash restarts', async () => {
    const sid = await session()
    const run = (body: Record<string, unknown>) => srv.post(`/v1/sessions/${sid}/code`, body)
    await json<CodeResult>(await run({ code: 'import json\ndata = {"a": 1}' }))
    const r = await json<CodeResult>(await run({ code: 'print("hi")\njson.dumps(data)' }))
    expect(r).toMatchObject({ stdout: 'hi\n', text: `'{"a": 1}'`, error: null })

    const e = await json<CodeResult>(await run({ code: 'undefined_name' }))
    expect(e.error).toMatchObject({ name: 'NameError' })

    const html = await json<CodeResult>(
      await run({ code: 'class T:\n    def _repr_html_(self):\n        return "<table/>"\nT()' }),
    )
    expect(html.outputs).toEqual([
      { type: 'result', data: expect.objectContaining({ 'text/html': '<table/>' }) },
    ])

    const t = await json<CodeResult>(await run({ code: 'while True: pass', timeoutMs: 800 }))
    expect(t).toMatchObject({ timedOut: true, error: { name: 'TimeoutError' } })
    expect((await json<CodeResult>(await run({ code: 'data["a"]' }))).text).toBe('1')

    const crash = await json<CodeResult>(await run({ code: 'import os; os._exit(1)' }))
    expect(crash.error?.name).toBe('KernelDied')
    const after = await json<CodeResult>(await run({ code: '"data" in globals()' }))
    expect(after).toMatchObject({ text: 'False', kernelRestarted: true })

    const node = await json<CodeResult>(
      await run({ code: 'const k = [1, 2, 3]; k.length', language: 'javascript' }),
    )
    expect(node.text).toBe('3')
  }, 120_000)

  test('HTTP: bad input is a clear 400; another tenant’s session is a 404', async () => {
    const sid = await session()
    const empty = await srv.post(`/v1/sessions/${sid}/code`, { code: '  ' })
    expect(empty.status).toBe(400)
    expect(await empty.text()).toContain('code is empty')
    const lang = await srv.post(`/v1/sessions/${sid}/code`, { code: '1', language: 'cobol' })
    expect(lang.status).toBe(400)
    expect(await lang.text()).toContain('language')
    const missing = await srv.post(`/v1/sessions/nope-${sid}/code`, { code: '1' })
    expect(missing.status).toBe(404)
  }, 60_000)

  test('MCP: run_code keeps state across calls and returns images', async () => {
    const call = async (args: Record<string, unknown>): Promise<ToolResult> =>
      (await client.callTool({ name: 'run_code', arguments: args }, undefined, {
        timeout: 60_000,
      })) as ToolResult
    const first = await call({ code: 'n = 6 * 7' })
    expect(first.isError, first.content[0]?.text).toBeFalsy()
    const r = await call({
      code: 'import base64\nclass P:\n    def _repr_png_(self):\n        return base64.b64decode("iVBORw0KGgo=")\ndisplay(P())\nn',
    })
    expect(r.isError, r.content[0]?.text).toBeFalsy()
    expect(r.content[0]?.text).toContain('result:\n42')
    expect(r.content).toContainEqual({ type: 'image', data: 'iVBORw0KGgo=', mimeType: 'image/png' })
    const bad = await call({ code: 'raise ValueError("nope")' })
    expect(bad.isError).toBe(true)
    expect(bad.content[0]?.text).toContain('ValueError: nope')
  }, 120_000)
})

/* Fleet mode: the kernel lives in the sandbox, so `sbx api` reaches it like the processes routes do. */
describe('the code interpreter through sbx api + sbx worker', () => {
  const scope = uniqueName('codefleet')
  const key = `sbx_test_${uniqueName('k').replace(/-/g, '')}`
  let api1: SbxServer
  let api2: SbxServer
  let worker: LineChild

  beforeAll(async () => {
    const config = fleetConfig(scope, { routing: { shell: { providerId: 'docker', profile: 'dev' } } })
    ;[api1, api2, worker] = await Promise.all([
      startSbxServer('api', { config, env: { SBX_API_KEY: key } }),
      startSbxServer('api', { config, env: { SBX_API_KEY: key } }),
      startSbxWorker({ config }),
    ])
  }, 180_000)

  afterAll(async () => {
    await Promise.allSettled([api1?.stop(), api2?.stop(), worker?.stop()])
    await removeScope(scope)
  }, 60_000)

  test('a variable set through one API is read through the other', async () => {
    const sid = uniqueName('s')
    await json(await api1.post('/v1/sessions', { id: sid, provider: 'docker', profile: 'dev' }), 201)
    await json(await api1.post(`/v1/sessions/${sid}/code`, { code: 'shared = "from api1"' }))
    const r = await json<CodeResult>(await api2.post(`/v1/sessions/${sid}/code`, { code: 'shared' }))
    expect(r).toMatchObject({ text: "'from api1'", kernelRestarted: false })
  }, 120_000)
})
