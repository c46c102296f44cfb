import { randomBytes, randomUUID } from 'node:crypto'
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { startLiveService } from '../support/live-service.js'
import type { LiveService } from '../support/live-service.js'
import { chatCompletion, startOpenAIServer } from '../fakes/model-servers/openai-server.js'
import type { OpenAIFakeServer } from '../fakes/model-servers/openai-server.js'

/*
 * Tenant isolation, as the log shows it: the real service (embedded runtime, real Docker) with two
 * tenants. Tenant globex tries every resource of tenant acme — sessions and their files, jobs and
 * their event stream, agent runs and their event stream, an MCP session (POST, GET stream, DELETE) —
 * and a request comes with an unknown key. Every attempt answers 404 (401 for the unknown key), each
 * is logged with the caller's tenant, route and outcome, and no log line carries either API key, the
 * unknown key, the model provider's key (set in env) or an Authorization header value.
 */

const tag = randomBytes(6).toString('hex')
const ACME = `acme-iso-${tag}-0123456789abcdef`
const GLOBEX = `globex-iso-${tag}-0123456789abcdef`
const UNKNOWN = `nobody-iso-${tag}-0123456789abcdef`
const MODEL_KEY = `sk-e2e-iso-${tag}-provider-secret`

/** One parsed pino line. */
interface LogLine {
  level: number
  msg?: string
  tenant?: string
  method?: string
  route?: string
  path?: string
  status?: number
  code?: string
  requestId?: string
  [k: string]: unknown
}

const raw: string[] = []
const logs = (): LogLine[] =>
  raw.flatMap((l) => l.split('\n').filter(Boolean)).map((l) => JSON.parse(l) as LogLine)

let model: OpenAIFakeServer
let live: LiveService
let url: string

beforeAll(async () => {
  model = await startOpenAIServer(MODEL_KEY)
  live = await startLiveService({
    prefix: `e2eiso${process.pid}${Date.now().toString(36)}`,
    config: {
      models: {
        default: {
          kind: 'openai-compatible',
          model: 'gpt-fake',
          baseURL: model.baseURL,
          apiKeyEnv: 'E2E_ISO_MODEL_KEY',
        },
      },
    },
    env: { E2E_ISO_MODEL_KEY: MODEL_KEY },
    keys: [
      { key: ACME, tenant: 'acme' },
      { key: GLOBEX, tenant: 'globex' },
    ],
    // Everything down to debug. The service masks known secrets as [REDACTED]; the test also checks
    // that it never had to (it must not try to write them at all).
    logLevel: 'debug',
    onLogLine: (line) => void raw.push(`${line}\n`),
  })
  url = live.server.url
}, 120_000)

afterAll(async () => {
  await live?.close()
  await model?.close()
}, 60_000)

function api(path: string, key: string, init: RequestInit & { requestId?: string } = {}): Promise<Response> {
  const headers = new Headers(init.headers)
  headers.set('authorization', `Bearer ${key}`)
  if (init.requestId) headers.set('x-request-id', init.requestId)
  if (init.body && !headers.has('content-type')) headers.set('content-type', 'application/json')
  return fetch(`${url}${path}`, { ...init, headers })
}

/** acme's resources: a session with a file, a finished job, a finished agent run, an open MCP session. */
async function acmeResources() {
  const session = `iso-${randomUUID().slice(0, 8)}`
  expect(
    (await api('/v1/sessions', ACME, { method: 'POST', body: JSON.stringify({ id: session }) })).status,
  ).toBe(201)
  const put = await api(`/v1/sessions/${session}/files?path=secret.txt`, ACME, {
    method: 'PUT',
    body: 'acme only',
    headers: { 'content-type': 'application/octet-stream' },
  })
  expect(put.status).toBe(200)

  const exec = await api('/v1/exec', ACME, {
    method: 'POST',
    body: JSON.stringify({
      provider: 'docker',
      profile: 'default',
      sessionId: session,
      command: 'cat secret.txt',
    }),
  })
  const job = (await exec.json()) as { id: string; state: string; result: { stdout: string } }
  expect(job).toMatchObject({ state: 'completed', result: { stdout: 'acme only' } })

  model.reply(
    chatCompletion({
      toolCalls: [
        { id: 'call_1', name: 'bash', arguments: JSON.stringify({ command: 'echo from-run > run.txt' }) },
      ],
      usage: { prompt_tokens: 10, completion_tokens: 5 },
    }),
    chatCompletion({ content: 'done', usage: { prompt_tokens: 20, completion_tokens: 2 } }),
  )
  const created = await api('/v1/agent-runs', ACME, {
    method: 'POST',
    body: JSON.stringify({ input: 'write a file', sessionId: session }),
  })
  expect(created.status).toBe(202)
  const { id: runId } = (await created.json()) as { id: string }
  expect(await (await api(`/v1/agent-runs/${runId}/events`, ACME)).text()).toContain('event: end')
  expect(await (await api(`/v1/agent-runs/${runId}`, ACME)).json()).toMatchObject({
    state: 'completed',
    output: 'done',
  })

  const transport = new StreamableHTTPClientTransport(new URL(`${url}/mcp`), {
    requestInit: { headers: { authorization: `Bearer ${ACME}` } },
  })
  const mcp = new Client({ name: 'iso', version: '1.0.0' })
  await mcp.connect(transport)
  const w = await mcp.callTool({ name: 'write_file', arguments: { path: 'm.txt', content: 'mcp acme' } })
  expect(w.isError).toBeFalsy()
  const mcpSession = transport.sessionId
  if (!mcpSession) throw new Error('no MCP session id')
  return { session, jobId: job.id, runId, mcp, mcpSession }
}

describe('tenant isolation in the log (real service, two tenants)', () => {
  test('every cross-tenant attempt is a 404 logged with tenant, route and outcome; no secret in any line', async () => {
    const acme = await acmeResources()
    const mcpHeaders = {
      'mcp-session-id': acme.mcpSession,
      accept: 'application/json, text/event-stream',
      'content-type': 'application/json',
    }
    const attempts: { what: string; method: string; path: string; init?: RequestInit; route: string }[] = [
      {
        what: 'read a file of the session',
        method: 'GET',
        path: `/v1/sessions/${acme.session}/files?path=secret.txt`,
        route: '/v1/sessions/:id/files',
      },
      {
        what: 'write a file into the session',
        method: 'PUT',
        path: `/v1/sessions/${acme.session}/files?path=planted.txt`,
        init: { body: 'globex was here', headers: { 'content-type': 'application/octet-stream' } },
        route: '/v1/sessions/:id/files',
      },
      {
        what: 'delete the session',
        method: 'DELETE',
        path: `/v1/sessions/${acme.session}`,
        route: '/v1/sessions/:id',
      },
      { what: 'read the job', method: 'GET', path: `/v1/jobs/${acme.jobId}`, route: '/v1/jobs/:id' },
      { what: 'cancel the job', method: 'DELETE', path: `/v1/jobs/${acme.jobId}`, route: '/v1/jobs/:id' },
      {
        what: "stream the job's events (SSE)",
        method: 'GET',
        path: `/v1/jobs/${acme.jobId}/events`,
        route: '/v1/jobs/:id/events',
      },
      {
        what: 'read the agent run',
        method: 'GET',
        path: `/v1/agent-runs/${acme.runId}`,
        route: '/v1/agent-runs/:id',
      },
      {
        what: 'cancel the agent run',
        method: 'DELETE',
        path: `/v1/agent-runs/${acme.runId}`,
        route: '/v1/agent-runs/:id',
      },
      {
        what: "stream the agent run's events (SSE)",
        method: 'GET',
        path: `/v1/agent-runs/${acme.runId}/events`,
        route: '/v1/agent-runs/:id/events',
      },
      {
        what: 'call a tool in the MCP session',
        method: 'POST',
        path: '/mcp',
        init: {
          headers: mcpHeaders,
          body: JSON.stringify({
            jsonrpc: '2.0',
            id: 7,
            method: 'tools/call',
            params: { name: 'read_file', arguments: { path: 'm.txt' } },
          }),
        },
        route: '/mcp',
      },
      {
        what: "open the MCP session's stream (SSE)",
        method: 'GET',
        path: '/mcp',
        init: { headers: { ...mcpHeaders, accept: 'text/event-stream' } },
        route: '/mcp',
      },
      {
        what: 'close the MCP session',
        method: 'DELETE',
        path: '/mcp',
        init: { headers: mcpHeaders },
        route: '/mcp',
      },
    ]

    const seen: { what: string; requestId: string; status: number }[] = []
    for (const a of attempts) {
      const requestId = `iso-${randomUUID()}`
      const r = await api(a.path, GLOBEX, { method: a.method, ...a.init, requestId })
      seen.push({ what: a.what, requestId, status: r.status })
      const body = (await r.json()) as { error?: { code: string } }
      expect(body.error?.code, a.what).toBe('NOT_FOUND')
    }
    expect(seen.map((s) => `${s.what}: ${s.status}`)).toEqual(attempts.map((a) => `${a.what}: 404`))

    const unknownId = `iso-${randomUUID()}`
    const unknown = await api('/v1/sessions', UNKNOWN, { requestId: unknownId })
    expect(unknown.status).toBe(401)
    const unknownMcpId = `iso-${randomUUID()}`
    const unknownMcp = await api('/mcp', UNKNOWN, {
      method: 'POST',
      requestId: unknownMcpId,
      headers: { accept: 'application/json, text/event-stream' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: {} }),
    })
    expect(unknownMcp.status).toBe(401)

    // acme's resources are untouched by globex's attempts.
    const file = await api(`/v1/sessions/${acme.session}/files?path=secret.txt`, ACME)
    expect(await file.text()).toBe('acme only')
    expect((await api(`/v1/sessions/${acme.session}/files?path=planted.txt`, ACME)).status).toBe(404)
    expect(await (await api(`/v1/jobs/${acme.jobId}`, ACME)).json()).toMatchObject({ state: 'completed' })
    expect(await (await api(`/v1/agent-runs/${acme.runId}`, ACME)).json()).toMatchObject({
      state: 'completed',
    })
    const read = (await acme.mcp.callTool({ name: 'read_file', arguments: { path: 'm.txt' } })) as {
      content: { text: string }[]
    }
    expect(read.content[0]?.text).toBe('mcp acme')
    await acme.mcp.close()

    const lines = logs()
    // Each cross-tenant attempt: an info-or-higher line naming the caller's tenant, the route and the 404.
    for (const [i, s] of seen.entries()) {
      const a = attempts[i]
      const logged = lines.filter((l) => l.requestId === s.requestId && l.level >= 30)
      expect(logged, `${s.what} is logged`).toContainEqual(
        expect.objectContaining({
          tenant: 'globex',
          method: a?.method,
          route: a?.route,
          status: 404,
          code: 'NOT_FOUND',
        }),
      )
    }
    // Each unknown key: a warning naming the path, without the key.
    for (const [requestId, path] of [
      [unknownId, '/v1/sessions'],
      [unknownMcpId, '/mcp'],
    ] as const) {
      expect(lines.filter((l) => l.requestId === requestId)).toContainEqual(
        expect.objectContaining({ level: 40, path, msg: 'rejected an unknown API key' }),
      )
    }

    // No line carries a key, the provider secret or an Authorization header value.
    const text = raw.join('')
    expect(lines.length).toBeGreaterThan(seen.length)
    for (const [name, secret] of [
      ['acme API key', ACME],
      ['globex API key', GLOBEX],
      ['unknown API key', UNKNOWN],
      ['model provider key (env)', MODEL_KEY],
      ['the random part of the keys', tag],
    ] as const) {
      expect(text.includes(secret), `${name} in the log`).toBe(false)
    }
    expect(text).not.toMatch(/bearer\s+\S/i)
    expect(text.includes('[REDACTED]'), 'a secret the service had to mask').toBe(false)
  })
})
