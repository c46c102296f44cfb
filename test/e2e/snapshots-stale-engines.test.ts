import { Redis } from 'ioredis'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { snapshotVolumeName } from '../../providers/docker/workspace.js'
import { SNAPSHOT_CREATING_LIMIT_MS } from '../../src/services/snapshot-service.js'
import { dockerAt, MAIN_ENGINE_HOST, removeScopeAt, startSecondEngine } from '../support/second-engine.js'
import type { SecondEngine } from '../support/second-engine.js'
import { SHARED_REDIS, configDir, fleetConfig, removeScope, runSbx, uniqueName } from '../support/sbx-cli.js'

/*
 * A capture that crashed on the second engine (issue 17) leaves its record `creating` in Redis and
 * its volume on that engine. A sweep beside the main engine must not take the record (its data would
 * stay behind, orphaned, on the second engine); the sweep beside the second engine removes both.
 * `sbx reap` runs the same sweep as a worker's periodic one, with DOCKER_HOST choosing the engine.
 */
describe('a failed snapshot of another engine', () => {
  const scope = uniqueName('snapxeng')
  const config = fleetConfig(scope, { queue: { engineRouting: true } } as never)
  const redis = new Redis(SHARED_REDIS)
  const hash = `${scope}:snapshots:default`
  const stale = `snap-stale-${uniqueName('x')}`
  const volume = snapshotVolumeName(stale)
  let second: SecondEngine

  const volumeOn = async (host: string): Promise<boolean> =>
    (await dockerAt(host, ['volume', 'ls', '-q', '--filter', `name=^${volume}$`])).stdout.trim() === volume

  beforeAll(async () => {
    second = await startSecondEngine()
    await redis.hset(
      hash,
      stale,
      JSON.stringify({
        id: stale,
        tenant: 'default',
        provider: 'docker',
        profile: 'default',
        sessionId: 's1',
        createdAt: Date.now() - SNAPSHOT_CREATING_LIMIT_MS - 60_000,
        state: 'creating',
        workspaceBytes: 0,
        engineId: second.engineId,
      }),
    )
    await dockerAt(second.host, ['volume', 'create', '--label', `sandbox-router.scope=${scope}`, volume])
  }, 180_000)

  afterAll(async () => {
    await dockerAt(second.host, ['volume', 'rm', '-f', volume]).catch(() => undefined)
    await removeScopeAt(second.host, scope).catch(() => undefined)
    await removeScope(scope)
    await redis.del(hash)
    redis.disconnect()
  }, 60_000)

  test('the main engine’s sweep leaves it; the second engine’s sweep removes its record and its volume', async () => {
    const cwd = configDir(config)
    const onMain = await runSbx(['reap', '--json'], { cwd, env: { DOCKER_HOST: MAIN_ENGINE_HOST } })
    expect(onMain.code, onMain.stderr).toBe(0)
    expect(JSON.parse(onMain.stdout)).toEqual({ reaped: 0, failedSnapshots: 0, deletedSnapshotData: 0 })
    expect(await redis.hexists(hash, stale)).toBe(1)
    expect(await volumeOn(second.host)).toBe(true)

    const onSecond = await runSbx(['reap', '--json'], { cwd, env: { DOCKER_HOST: second.host } })
    expect(onSecond.code, onSecond.stderr).toBe(0)
    expect(JSON.parse(onSecond.stdout)).toEqual({ reaped: 0, failedSnapshots: 1, deletedSnapshotData: 0 })
    expect(await redis.hexists(hash, stale)).toBe(0)
    expect(await volumeOn(second.host)).toBe(false)
  }, 120_000)
})
