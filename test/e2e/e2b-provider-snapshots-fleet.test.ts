import { Sandbox } from 'e2b'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { type E2BEndpoint, startE2BEndpoint } from '../support/e2b-endpoint.js'
import { fleetConfig, removeScope, startSbxServer, startSbxWorker, uniqueName } from '../support/sbx-cli.js'
import type { LineChild, SbxServer } from '../support/sbx-cli.js'
import type { ExecJob } from '../support/workspaces.js'

/*
 * Snapshots and forks on the E2B provider in a fleet: two `sbx api` processes and one `sbx worker`
 * on the shared Redis, whose E2B is our own endpoint (`sbx serve` on Docker). The snapshot is held
 * by E2B; a session started from it through one API process gets its sandbox (started from the
 * snapshot by that process) in the worker, which finds it by E2B metadata alone.
 */

const PROFILE = 'remote-e2b'

async function json<T>(res: Response, status = 200): Promise<T> {
  const body = await res.text()
  expect(res.status, body).toBe(status)
  return JSON.parse(body) as T
}

async function execIn(srv: SbxServer, sessionId: string, command: string): Promise<ExecJob> {
  const job = await json<ExecJob>(
    await srv.post('/v1/exec', { provider: 'e2b', profile: PROFILE, sessionId, command }),
  )
  expect(job.state, JSON.stringify(job)).toBe('completed')
  return job
}

describe('E2B provider snapshots through sbx api + sbx worker', () => {
  const scope = uniqueName('e2bsnapfleet')
  const key = `sbx_test_${uniqueName('k')}`
  let inner: E2BEndpoint
  let api1: SbxServer
  let api2: SbxServer
  let worker: LineChild

  beforeAll(async () => {
    inner = await startE2BEndpoint({ tag: 'e2bsnapfleet-in' })
    const config = fleetConfig(scope, {
      quotas: { requestsPerSecond: 1000 },
      profiles: { [PROFILE]: { provider: 'e2b', template: 'base', cwd: '/home/user' } },
    })
    const env = {
      SBX_API_KEY: key,
      E2B_API_KEY: inner.apiKey,
      E2B_API_URL: inner.apiUrl,
      E2B_SANDBOX_URL: inner.sandboxUrl,
    }
    ;[api1, api2, worker] = await Promise.all([
      startSbxServer('api', { config, env }),
      startSbxServer('api', { config, env }),
      startSbxWorker({ config, env }),
    ])
  }, 180_000)

  afterAll(async () => {
    await Promise.allSettled([api1?.stop(), api2?.stop(), worker?.stop()])
    await removeScope(scope)
    expect(await inner?.close()).toBe(0)
  }, 120_000)

  test('a snapshot taken on one API process starts sessions and forks on another; they run on the worker', async () => {
    const innerConn = { apiKey: inner.apiKey, apiUrl: inner.apiUrl, sandboxUrl: inner.sandboxUrl }
    await execIn(api1, 'origin', 'echo from-origin > /home/user/seed')
    const snap = await json<{ id: string; state: string; workspaceBytes: number }>(
      await api1.post('/v1/sessions/origin/snapshots', {}),
      201,
    )
    expect(snap).toMatchObject({ state: 'ready', workspaceBytes: 0 })
    // E2B holds it, under our id.
    expect((await Sandbox.listSnapshots(innerConn).nextItems()).map((s) => s.names)).toEqual([[snap.id]])
    await execIn(api1, 'origin', 'echo changed > /home/user/seed')

    const started = await json<{ id: string }>(await api2.post('/v1/sessions', { snapshot: snap.id }), 201)
    const first = await execIn(api1, started.id, 'cat /home/user/seed; pwd')
    expect(first.result?.stdout).toBe('from-origin\n/home/user\n')
    // The sandbox the restore started is the one the session uses.
    const info = await Sandbox.getInfo(first.result?.sandboxId ?? '', innerConn)
    expect(info.metadata).toMatchObject({ 'sandbox-router.snapshot-seed': 'true' })

    const forked = await json<{ sessions: { id: string }[] }>(
      await api2.post('/v1/sessions/origin/fork', { count: 2 }),
      201,
    )
    expect(forked.sessions).toHaveLength(2)
    for (const s of forked.sessions)
      expect((await execIn(api1, s.id, 'cat /home/user/seed')).result?.stdout).toBe('changed\n')
    // The fork's snapshot is gone from E2B; the named one goes with its delete.
    expect((await Sandbox.listSnapshots(innerConn).nextItems()).map((s) => s.names)).toEqual([[snap.id]])
    expect((await api2.fetch(`/v1/snapshots/${snap.id}`, { method: 'DELETE' })).status).toBe(200)
    expect(await Sandbox.listSnapshots(innerConn).nextItems()).toEqual([])
    expect((await execIn(api2, started.id, 'cat /home/user/seed')).result?.stdout).toBe('from-origin\n')

    for (const id of ['origin', started.id, ...forked.sessions.map((s) => s.id)])
      expect((await api1.fetch(`/v1/sessions/${id}`, { method: 'DELETE' })).status).toBe(200)
    expect(await inner.sandboxIds()).toEqual([])
  }, 240_000)
})
