import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { fleetConfig, removeScope, startSbxServer, startSbxWorker, uniqueName } from '../support/sbx-cli.js'
import type { LineChild, SbxServer } from '../support/sbx-cli.js'
import { PWS, docker, execIn, removeScopeData, scopeVolumes } from '../support/workspaces.js'

/*
 * Snapshots and forks in a fleet: two `sbx api` processes and one `sbx worker` on the shared Redis.
 * A snapshot taken through one API process is listed and forked through the other (its record is
 * in Redis); the forks' commands run on the worker. An idle-evicted session keeps its workspace.
 */

interface Snapshot {
  id: string
  state: string
}

async function json<T>(res: Response, status = 200): Promise<T> {
  const body = await res.text()
  expect(res.status, body).toBe(status)
  return JSON.parse(body) as T
}

/** Resolves once the engine has no running container with this id (evicted or ended itself). */
async function stopped(id: string): Promise<void> {
  const deadline = Date.now() + 60_000
  for (;;) {
    const out = await docker('ps', '-q', '--no-trunc', '--filter', `id=${id}`)
    if (!out.trim()) return
    if (Date.now() > deadline) throw new Error(`container ${id} still runs after 60 s`)
    await new Promise((r) => setTimeout(r, 250))
  }
}

describe('snapshots and forks through sbx api + sbx worker', () => {
  const scope = uniqueName('wsfleet')
  const key = `sbx_test_${uniqueName('k')}`
  let api1: SbxServer
  let api2: SbxServer
  let worker: LineChild
  beforeAll(async () => {
    const config = fleetConfig(scope, {
      quotas: { requestsPerSecond: 1000 },
      profiles: {
        [PWS]: { provider: 'docker', workspace: { persistent: true } },
        'pws-idle': { provider: 'docker', workspace: { persistent: true }, idleTtlMs: 1_500 },
      },
    })
    ;[api1, api2, worker] = await Promise.all([
      startSbxServer('api', { config, env: { SBX_API_KEY: key } }),
      startSbxServer('api', { config, env: { SBX_API_KEY: key } }),
      startSbxWorker({ config }),
    ])
  }, 180_000)
  afterAll(async () => {
    await Promise.allSettled([api1?.stop(), api2?.stop(), worker?.stop()])
    await removeScopeData(scope)
    await removeScope(scope)
  }, 60_000)

  test('a snapshot taken on one API process forks on another; forks run on the worker', async () => {
    await execIn(api1, 'origin', 'echo from-origin > /workspace/seed')
    const snap = await json<Snapshot>(await api1.post('/v1/sessions/origin/snapshots', {}), 201)
    expect(snap.state).toBe('ready')
    const listed = await json<{ snapshots: Snapshot[] }>(await api2.fetch('/v1/snapshots'))
    expect(listed.snapshots.map((s) => s.id)).toEqual([snap.id])

    const forked = await json<{ sessions: { id: string }[] }>(
      await api2.post('/v1/sessions/origin/fork', { count: 2 }),
      201,
    )
    expect(forked.sessions).toHaveLength(2)
    for (const s of forked.sessions)
      expect((await execIn(api1, s.id, 'cat /workspace/seed')).result?.stdout).toBe('from-origin\n')
    const started = await json<{ id: string }>(await api1.post('/v1/sessions', { snapshot: snap.id }), 201)
    expect((await execIn(api2, started.id, 'cat /workspace/seed')).result?.stdout).toBe('from-origin\n')

    expect((await api2.fetch(`/v1/snapshots/${snap.id}`, { method: 'DELETE' })).status).toBe(200)
    expect((await api1.fetch(`/v1/snapshots/${snap.id}`)).status).toBe(404)
    for (const id of ['origin', started.id, ...forked.sessions.map((s) => s.id)])
      expect((await api1.fetch(`/v1/sessions/${id}`, { method: 'DELETE' })).status).toBe(200)
    expect(await scopeVolumes(scope)).toEqual([])
  }, 180_000)

  test("after idle eviction the session's next sandbox mounts the same workspace", async () => {
    const first = await execIn(api1, 'idle', 'echo survived > /workspace/x', { profile: 'pws-idle' })
    await stopped(first.result?.sandboxId ?? '')
    const next = await execIn(api2, 'idle', 'cat /workspace/x', { profile: 'pws-idle' })
    expect(next.result?.stdout).toBe('survived\n')
    expect(next.result?.sandboxId).not.toBe(first.result?.sandboxId)
    expect(next.result?.sandboxReplaced).toMatchObject({ workspaceKept: true })
  }, 120_000)
})
