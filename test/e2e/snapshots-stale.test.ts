import { Redis } from 'ioredis'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { snapshotVolumeName } from '../../providers/docker/workspace.js'
import { SNAPSHOT_CREATING_LIMIT_MS } from '../../src/services/snapshot-service.js'
import {
  SHARED_REDIS,
  configDir,
  fleetConfig,
  removeScope,
  runSbx,
  startSbxServer,
  uniqueName,
} from '../support/sbx-cli.js'
import type { SbxServer } from '../support/sbx-cli.js'
import { docker } from '../support/workspaces.js'

/*
 * A crash mid-snapshot (the API process taking it dies between adding the record and marking it
 * ready) leaves its record `creating` in Redis and maybe part of its data on the engine. Here that
 * leftover is made as the crash leaves it: the record in the fleet's hash, and a snapshot volume
 * of that id. Past the bound it reads as `failed` with a reason through `sbx api`, cannot start a
 * session, and `sbx reap` removes it with its volume; a young `creating` record is left alone.
 */
describe('a snapshot a crash left creating', () => {
  const scope = uniqueName('snapstale')
  const key = `sbx_test_${uniqueName('k').replace(/-/g, '')}`
  const config = fleetConfig(scope)
  const redis = new Redis(SHARED_REDIS)
  const hash = `${scope}:snapshots:default`
  const stale = `snap-stale-${uniqueName('x')}`
  const young = `snap-young-${uniqueName('x')}`
  const volume = snapshotVolumeName(stale)
  let api: SbxServer | undefined

  const record = (id: string, createdAt: number): string =>
    JSON.stringify({
      id,
      tenant: 'default',
      provider: 'docker',
      profile: 'default',
      sessionId: 's1',
      createdAt,
      state: 'creating',
      workspaceBytes: 0,
    })

  beforeAll(async () => {
    await redis.hset(hash, stale, record(stale, Date.now() - SNAPSHOT_CREATING_LIMIT_MS - 60_000))
    await redis.hset(hash, young, record(young, Date.now()))
    await docker('volume', 'create', '--label', `sandbox-router.scope=${scope}`, volume)
    api = await startSbxServer('api', { config, env: { SBX_API_KEY: key } })
  }, 120_000)

  afterAll(async () => {
    await api?.stop()
    await docker('volume', 'rm', '-f', volume).catch(() => undefined)
    await removeScope(scope)
    redis.disconnect()
  }, 60_000)

  test('it reads as failed with a reason, cannot start a session, and sbx reap removes it and its data', async () => {
    const srv = api
    if (!srv) throw new Error('no api')
    const one = await srv.fetch(`/v1/snapshots/${stale}`)
    expect(one.status).toBe(200)
    const body = (await one.json()) as { state: string; reason?: string }
    expect(body.state).toBe('failed')
    expect(body.reason).toMatch(
      /still being taken .* s after it began: the process taking it stopped mid-capture/,
    )
    const list = (await (await srv.fetch('/v1/snapshots')).json()) as {
      snapshots: { id: string; state: string }[]
    }
    expect(list.snapshots).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ id: stale, state: 'failed' }),
        expect.objectContaining({ id: young, state: 'creating' }),
      ]),
    )
    const start = await srv.post('/v1/sessions', { snapshot: stale })
    expect(start.status).toBe(409)
    expect(await start.text()).toContain(`snapshot ${stale} failed: the snapshot was still being taken`)
    // Stop the API first: its own sweep (on the reap interval) must not be the one that removes it here.
    await srv.stop()
    api = undefined

    const r = await runSbx(['reap', '--json'], { cwd: configDir(config) })
    expect(r.code, r.stderr).toBe(0)
    expect(JSON.parse(r.stdout)).toEqual({ reaped: 0, failedSnapshots: 1, deletedSnapshotData: 0 })
    expect(await redis.hexists(hash, stale)).toBe(0)
    expect(await redis.hexists(hash, young)).toBe(1)
    expect((await docker('volume', 'ls', '-q', '--filter', `name=^${volume}$`)).trim()).toBe('')
  }, 120_000)
})
