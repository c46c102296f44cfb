import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { startSbxServer, uniqueName } from '../support/sbx-cli.js'
import type { SbxServer } from '../support/sbx-cli.js'
import {
  PWS,
  containerOf,
  docker,
  execIn,
  removeScopeData,
  scopeImages,
  scopeVolumes,
} from '../support/workspaces.js'

/*
 * Persistent workspaces, snapshots and forks through `sbx serve` over HTTP, against the real
 * engine: the workspace survives `docker kill` and `docker rm`; a snapshot starts new sessions that
 * hold its files; a fork of 3 gives 3 independent sessions; tenants are isolated; the snapshot
 * quota holds; deleting sessions and snapshots leaves no volume or image behind.
 */

const KEY_A = `sbx_test_a_${uniqueName('k')}`
const KEY_B = `sbx_test_b_${uniqueName('k')}`

interface Session {
  id: string
  profile: string
}
interface Snapshot {
  id: string
  state: string
  sessionId: string
  workspaceBytes: number
}

describe('persistent workspaces, snapshots and forks through sbx serve', () => {
  const scope = uniqueName('wsnap')
  let srv: SbxServer
  beforeAll(async () => {
    srv = await startSbxServer('serve', {
      config: {
        queue: { prefix: scope },
        quotas: { requestsPerSecond: 1000, maxSnapshots: 2 },
        apiKeys: [
          { key: KEY_A, tenant: 'ta' },
          { key: KEY_B, tenant: 'tb' },
        ],
        profiles: {
          [PWS]: { provider: 'docker', workspace: { persistent: true, sizeMb: 64 } },
        },
      },
      env: { SBX_API_KEY: KEY_A },
    })
  }, 120_000)
  afterAll(async () => {
    await srv?.stop()
    await removeScopeData(scope)
  })

  async function snapshot(sessionId: string, key = KEY_A): Promise<Response> {
    return srv.post(`/v1/sessions/${sessionId}/snapshots`, {}, { key })
  }

  test('the workspace survives docker kill and docker rm of its container; the result says so', async () => {
    const first = await execIn(srv, 'p1', 'echo precious > /workspace/data && echo ok')
    const lost = first.result?.sandboxId ?? ''
    await docker('kill', await containerOf(scope, lost))
    const next = await execIn(srv, 'p1', 'cat /workspace/data')
    expect(next.result?.stdout).toBe('precious\n')
    expect(next.result?.sandboxId).not.toBe(lost)
    expect(next.result?.sandboxReplaced).toMatchObject({ workspaceKept: true, previousSandboxId: lost })
    await docker('rm', '-f', await containerOf(scope, next.result?.sandboxId ?? ''))
    const third = await execIn(srv, 'p1', 'cat /workspace/data')
    expect(third.result?.stdout).toBe('precious\n')
    expect(await scopeVolumes(scope)).toHaveLength(1)
    // Deleting the session deletes its workspace.
    expect((await srv.fetch('/v1/sessions/p1', { method: 'DELETE' })).status).toBe(200)
    expect(await scopeVolumes(scope)).toHaveLength(0)
  }, 120_000)

  test('providers say which support workspaces; a tmpfs profile cannot be snapshotted', async () => {
    const res = await srv.fetch('/v1/providers')
    const body = (await res.json()) as { providers: { id: string; workspaces?: unknown }[] }
    expect(body.providers.find((p) => p.id === 'docker')?.workspaces).toEqual({
      persistent: true,
      snapshots: true,
      fork: true,
    })
    await execIn(srv, 'tmp1', 'true', { profile: 'default' })
    const refused = await snapshot('tmp1')
    expect(refused.status).toBe(400)
    expect(await refused.text()).toContain('workspace: { persistent: true }')
  }, 120_000)

  test('snapshot, start a session from it: the files are there; tenants are isolated', async () => {
    await execIn(srv, 'src', 'mkdir -p /workspace/proj && echo v1 > /workspace/proj/f')
    const res = await snapshot('src')
    expect(res.status, await res.clone().text()).toBe(201)
    const snap = (await res.json()) as Snapshot
    expect(snap).toMatchObject({ state: 'ready', sessionId: 'src' })
    expect(snap.workspaceBytes).toBeGreaterThan(0)
    const listed = (await (await srv.fetch('/v1/snapshots')).json()) as { snapshots: Snapshot[] }
    expect(listed.snapshots.map((s) => s.id)).toEqual([snap.id])

    // Another tenant sees none of it.
    expect((await srv.fetch(`/v1/snapshots/${snap.id}`, { key: KEY_B })).status).toBe(404)
    expect(
      ((await (await srv.fetch('/v1/snapshots', { key: KEY_B })).json()) as { snapshots: unknown[] })
        .snapshots,
    ).toEqual([])
    expect((await srv.fetch(`/v1/snapshots/${snap.id}`, { key: KEY_B, method: 'DELETE' })).status).toBe(404)
    expect((await srv.post('/v1/sessions', { snapshot: snap.id }, { key: KEY_B })).status).toBe(404)
    expect((await snapshot('src', KEY_B)).status).toBe(404)
    expect((await srv.post('/v1/sessions/src/fork', {}, { key: KEY_B })).status).toBe(404)

    const made = await srv.post('/v1/sessions', { id: 'restored', snapshot: snap.id })
    expect(made.status, await made.clone().text()).toBe(201)
    expect(((await made.json()) as Session).profile).toBe(PWS)
    expect((await execIn(srv, 'restored', 'cat /workspace/proj/f')).result?.stdout).toBe('v1\n')
    // The snapshot can go; the session started from it keeps its copy.
    expect((await srv.fetch(`/v1/snapshots/${snap.id}`, { method: 'DELETE' })).status).toBe(200)
    expect((await srv.fetch(`/v1/snapshots/${snap.id}`)).status).toBe(404)
    await docker('rm', '-f', (await execIn(srv, 'restored', 'true')).result?.sandboxId ?? '')
    expect((await execIn(srv, 'restored', 'cat /workspace/proj/f')).result?.stdout).toBe('v1\n')
    const unknown = await srv.post('/v1/sessions', { snapshot: 'snap-nope' })
    expect(unknown.status).toBe(404)
    expect(await unknown.text()).toContain('GET /v1/snapshots')
  }, 180_000)

  test('fork count 3 gives 3 independent sessions of one prepared workspace', async () => {
    await execIn(srv, 'base', 'echo prepared > /workspace/state')
    const res = await srv.post('/v1/sessions/base/fork', { count: 3 })
    expect(res.status, await res.clone().text()).toBe(201)
    const { sessions, snapshot: kept } = (await res.json()) as { sessions: Session[]; snapshot?: Snapshot }
    expect(sessions).toHaveLength(3)
    expect(kept).toBeUndefined()
    expect(new Set(sessions.map((s) => s.id)).size).toBe(3)
    for (const [i, s] of sessions.entries())
      expect(
        (await execIn(srv, s.id, `cat /workspace/state && echo ${i} > /workspace/state`)).result?.stdout,
      ).toBe('prepared\n')
    for (const [i, s] of sessions.entries())
      expect((await execIn(srv, s.id, 'cat /workspace/state')).result?.stdout).toBe(`${i}\n`)
    expect((await execIn(srv, 'base', 'cat /workspace/state')).result?.stdout).toBe('prepared\n')
    // The fork's snapshot was not kept.
    expect(((await (await srv.fetch('/v1/snapshots')).json()) as { snapshots: unknown[] }).snapshots).toEqual(
      [],
    )
    const bad = await srv.post('/v1/sessions/base/fork', { count: 0 })
    expect(bad.status).toBe(400)
    expect(await bad.text()).toContain('count')
  }, 180_000)

  test('the snapshot quota holds; deleting sessions and snapshots removes their volumes and images', async () => {
    const a = (await (await snapshot('base')).json()) as Snapshot
    const b = (await (await snapshot('base')).json()) as Snapshot
    const third = await snapshot('base')
    expect(third.status).toBe(429)
    expect(await third.text()).toContain('quotas.maxSnapshots')
    const forkKept = await srv.post('/v1/sessions/base/fork', { keepSnapshot: true })
    expect(forkKept.status).toBe(429)
    for (const s of [a, b])
      expect((await srv.fetch(`/v1/snapshots/${s.id}`, { method: 'DELETE' })).status).toBe(200)

    const all = (await (await srv.fetch('/v1/sessions')).json()) as { sessions: Session[] }
    for (const s of all.sessions)
      expect((await srv.fetch(`/v1/sessions/${s.id}`, { method: 'DELETE' })).status).toBe(200)
    expect(await scopeVolumes(scope)).toEqual([])
    expect(await scopeImages(scope)).toEqual([])
  }, 180_000)
})
