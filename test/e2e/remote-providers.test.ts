/*
 * routeTo("daytona" | "e2b", …) end to end: the service, configured only through env (each key
 * variable and API URL), routes HTTP execs, session files and tool calls into the remote providers —
 * here the local Daytona fake and our own E2B endpoint (`sbx serve` on Docker), driven by the real SDKs.
 */
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { startFakeDaytona } from '../fakes/daytona/index.js'
import type { FakeDaytona } from '../fakes/daytona/index.js'
import { type E2BEndpoint, startE2BEndpoint } from '../support/e2b-endpoint.js'
import { startLiveService } from '../support/live-service.js'
import type { LiveService } from '../support/live-service.js'
import { NUMBERED_LINES, expectHeadMarkerTail } from '../support/numbered-lines.js'

const KEY = 'remote-key-0123456789abcdef'
const prefix = `e2er${process.pid}${Date.now().toString(36)}`

let daytona: FakeDaytona
let e2b: E2BEndpoint
let live: LiveService

beforeAll(async () => {
  ;[daytona, e2b] = await Promise.all([startFakeDaytona(), startE2BEndpoint()])
  live = await startLiveService({
    prefix,
    keys: [{ key: KEY, tenant: 'acme' }],
    config: {
      profiles: {
        'remote-daytona': { provider: 'daytona', snapshot: 'sbx-test', defaultTimeoutMs: 20_000 },
        'remote-e2b': { provider: 'e2b', template: 'base', defaultTimeoutMs: 20_000 },
      },
      routing: { shell: { providerId: 'daytona', profile: 'remote-daytona' } },
      // E2B finds the agent binary scripts/setup.sh built; Daytona is pointed at a missing one.
      providers: { daytona: { agentBinaryPath: '/nonexistent/sbx-agent' } },
    },
    env: {
      DAYTONA_API_KEY: daytona.apiKey,
      DAYTONA_API_URL: daytona.apiUrl,
      E2B_API_KEY: e2b.apiKey,
      E2B_API_URL: e2b.apiUrl,
      E2B_SANDBOX_URL: e2b.sandboxUrl,
    },
  })
}, 120_000)

afterAll(async () => {
  await live?.close()
  // Embedded close destroys its sandboxes on every provider: none may be left at either one.
  expect(daytona.containers()).toEqual([])
  expect(await e2b.sandboxIds()).toEqual([])
  await Promise.all([daytona?.close(), e2b?.close()])
}, 120_000)

function api(path: string, init: RequestInit = {}): Promise<Response> {
  const headers = new Headers(init.headers)
  headers.set('authorization', `Bearer ${KEY}`)
  if (init.body && !headers.has('content-type')) headers.set('content-type', 'application/json')
  return fetch(`${live.server.url}${path}`, { ...init, headers })
}

interface Job {
  state: string
  result: { exitCode: number; stdout: string; stderr: string; sandboxId: string; truncated: boolean }
}

const labelsAt = async (
  provider: 'daytona' | 'e2b',
  sandboxId: string,
): Promise<Record<string, string> | undefined> =>
  provider === 'daytona'
    ? daytona.sandboxes().find((s) => s.id === sandboxId)?.labels
    : (await e2b.info(sandboxId))?.metadata

describe.each(['daytona', 'e2b'] as const)('routing into %s through the service', (provider) => {
  const profile = `remote-${provider}`
  const exec = async (body: Record<string, unknown>): Promise<Job> => {
    const r = await api('/v1/exec', { method: 'POST', body: JSON.stringify({ provider, profile, ...body }) })
    expect(r.status).toBe(200)
    return (await r.json()) as Job
  }

  test('readiness names the provider; exec returns separate streams and the exact exit code', async () => {
    const ready = (await (await api('/readyz')).json()) as { checks: Record<string, { ok: boolean }> }
    expect(ready.checks[provider]?.ok).toBe(true)
    const job = await exec({ command: 'echo out; echo err >&2; exit 7' })
    expect(job.state).toBe('completed')
    expect(job.result).toMatchObject({ exitCode: 7, stdout: 'out\n', stderr: 'err\n' })
  })

  test('a session keeps one remote sandbox: files written by the API are seen by commands', async () => {
    const id = `s-${provider}`
    const created = await api('/v1/sessions', {
      method: 'POST',
      body: JSON.stringify({ id, provider, profile }),
    })
    expect(created.status).toBe(201)
    const put = await api(`/v1/sessions/${id}/files?path=notes/a.txt`, {
      method: 'PUT',
      body: 'from the API',
      headers: { 'content-type': 'application/octet-stream' },
    })
    expect(put.status).toBe(200)
    const first = (await exec({ sessionId: id, command: 'cat notes/a.txt; echo more > b.txt' })).result
    expect(first.stdout).toBe('from the API')
    const second = (await exec({ sessionId: id, command: 'cat b.txt' })).result
    expect(second.stdout).toBe('more\n')
    expect(second.sandboxId).toBe(first.sandboxId)
    expect(await (await api(`/v1/sessions/${id}/files?path=b.txt`)).text()).toBe('more\n')
    expect(await labelsAt(provider, first.sandboxId)).toMatchObject({
      'sandbox-router.tenant': 'acme',
      'sandbox-router.profile': profile,
    })
  })

  test('5 MiB of output past the 1 MiB cap: the result keeps the head and the tail, with the marker', async () => {
    const job = await exec({ command: `seq 1 ${NUMBERED_LINES}` })
    expect(job.result).toMatchObject({ exitCode: 0, truncated: true })
    expectHeadMarkerTail(job.result.stdout, 1024 * 1024)
  })

  test('a timeout is enforced inside the sandbox and keeps the partial output', async () => {
    const job = await exec({ command: 'echo before; sleep 30; echo after', timeoutMs: 1_000 })
    expect(job.result).toMatchObject({ stdout: 'before\n', timedOut: true })
  })
})

test("the server's routing policy sends shell tool calls to the configured remote profile", async () => {
  const r = await api('/v1/tool-calls', {
    method: 'POST',
    body: JSON.stringify({ name: 'bash', arguments: JSON.stringify({ command: 'echo routed; exit 2' }) }),
  })
  expect(r.status).toBe(200)
  const body = (await r.json()) as {
    decision: { kind: string; providerId: string }
    result: { exitCode: number; stdout: string }
  }
  expect(body.decision).toMatchObject({ kind: 'routeTo', providerId: 'daytona' })
  expect(body.result).toMatchObject({ exitCode: 2, stdout: 'routed\n' })
})

describe('background processes on remote providers', () => {
  const session = async (id: string, provider: string) => {
    const r = await api('/v1/sessions', {
      method: 'POST',
      body: JSON.stringify({ id, provider, profile: `remote-${provider}` }),
    })
    expect(r.status).toBe(201)
    return `/v1/sessions/${id}/processes`
  }

  test('E2B: the agent binary is uploaded on first use; start, stdin, output, signal as on Docker', async () => {
    const base = await session('s-procs-e2b', 'e2b')
    const started = await api(base, {
      method: 'POST',
      body: JSON.stringify({ command: 'while read -r l; do echo "got $l"; done' }),
    })
    const p = (await started.json()) as { id: string; state: string }
    expect(started.status, JSON.stringify(p)).toBe(201)
    expect(p.state).toBe('running')
    const w = await api(`${base}/${p.id}/stdin`, { method: 'POST', body: JSON.stringify({ data: 'one\n' }) })
    expect(w.status).toBe(200)
    const o = (await (await api(`${base}/${p.id}/output?waitMs=10000`)).json()) as {
      stdout: { data: string }
    }
    expect(o.stdout.data).toBe('got one\n')
    const killed = await api(`${base}/${p.id}/signal`, {
      method: 'POST',
      body: JSON.stringify({ signal: 'SIGKILL' }),
    })
    expect(((await killed.json()) as { state: string; signal: string }).signal).toBe('SIGKILL')
  })

  test('Daytona without its agent binary: UNSUPPORTED (501) naming the path, the key and the fix', async () => {
    const base = await session('s-procs-daytona', 'daytona')
    const r = await api(base, { method: 'POST', body: JSON.stringify({ command: 'sleep 60' }) })
    const body = (await r.json()) as { error: { code: string; message: string } }
    expect(r.status, JSON.stringify(body)).toBe(501)
    expect(body.error.code).toBe('UNSUPPORTED')
    expect(body.error.message).toContain('/nonexistent/sbx-agent (providers.daytona.agentBinaryPath)')
    expect(body.error.message).toContain('scripts/setup.sh')
  })
})
