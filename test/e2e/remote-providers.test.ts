/*
 * routeTo("daytona", …) end to end: the service, configured only through env (the key variable and
 * the API URL), routes HTTP execs, session files and tool calls into a remote provider — here the local
 * Daytona fake, driven by the real SDK.
 */
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { startFakeDaytona } from '../fakes/daytona/index.js'
import type { FakeDaytona } from '../fakes/daytona/index.js'
import { startLiveService } from '../support/live-service.js'
import type { LiveService } from '../support/live-service.js'

const KEY = 'remote-key-0123456789abcdef'
const prefix = `e2er${process.pid}${Date.now().toString(36)}`

let daytona: FakeDaytona
let live: LiveService

beforeAll(async () => {
  daytona = await startFakeDaytona()
  live = await startLiveService({
    prefix,
    keys: [{ key: KEY, tenant: 'acme' }],
    config: {
      profiles: { remote: { provider: 'daytona', snapshot: 'sbx-test', defaultTimeoutMs: 20_000 } },
      routing: { shell: { providerId: 'daytona', profile: 'remote' } },
    },
    env: { DAYTONA_API_KEY: daytona.apiKey, DAYTONA_API_URL: daytona.apiUrl },
  })
}, 120_000)

afterAll(async () => {
  await live?.close()
  // Embedded close destroys its sandboxes on every provider: none may be left at the fake.
  expect(daytona.containers()).toEqual([])
  await daytona?.close()
}, 120_000)

function api(path: string, init: RequestInit = {}): Promise<Response> {
  const headers = new Headers(init.headers)
  headers.set('authorization', `Bearer ${KEY}`)
  if (init.body && !headers.has('content-type')) headers.set('content-type', 'application/json')
  return fetch(`${live.server.url}${path}`, { ...init, headers })
}

describe('routing into Daytona through the service', () => {
  test('readiness names the provider; exec returns separate streams and the exact exit code', async () => {
    const ready = (await (await api('/readyz')).json()) as { checks: Record<string, { ok: boolean }> }
    expect(ready.checks['daytona']?.ok).toBe(true)
    const r = await api('/v1/exec', {
      method: 'POST',
      body: JSON.stringify({
        provider: 'daytona',
        profile: 'remote',
        command: 'echo out; echo err >&2; exit 7',
      }),
    })
    expect(r.status).toBe(200)
    const job = (await r.json()) as {
      state: string
      result: { exitCode: number; stdout: string; stderr: string }
    }
    expect(job.state).toBe('completed')
    expect(job.result).toMatchObject({ exitCode: 7, stdout: 'out\n', stderr: 'err\n' })
  })

  test('a session keeps one remote sandbox: files written by the API are seen by commands', async () => {
    expect(
      (
        await api('/v1/sessions', {
          method: 'POST',
          body: JSON.stringify({ id: 'd1', provider: 'daytona', profile: 'remote' }),
        })
      ).status,
    ).toBe(201)
    const put = await api('/v1/sessions/d1/files?path=notes/a.txt', {
      method: 'PUT',
      body: 'from the API',
      headers: { 'content-type': 'application/octet-stream' },
    })
    expect(put.status).toBe(200)
    const run = async (command: string) =>
      (
        (await (
          await api('/v1/exec', {
            method: 'POST',
            body: JSON.stringify({ provider: 'daytona', profile: 'remote', sessionId: 'd1', command }),
          })
        ).json()) as { result: { stdout: string; sandboxId: string } }
      ).result
    const first = await run('cat notes/a.txt; echo more > b.txt')
    expect(first.stdout).toBe('from the API')
    const second = await run('cat b.txt')
    expect(second.stdout).toBe('more\n')
    expect(second.sandboxId).toBe(first.sandboxId)
    expect(await (await api('/v1/sessions/d1/files?path=b.txt')).text()).toBe('more\n')
    expect(daytona.sandboxes().find((s) => s.id === first.sandboxId)?.labels).toMatchObject({
      'sandbox-router.tenant': 'acme',
      'sandbox-router.profile': 'remote',
    })
  })

  test("the server's routing policy sends shell tool calls to the remote profile", async () => {
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
})
