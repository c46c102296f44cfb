import { afterAll, describe, expect, test } from 'vitest'
import type { ConfigInput } from '../../src/config/schema.js'
import { freePort } from '../support/redis-server.js'
import {
  configDir,
  fleetConfig,
  removeScope,
  runSbx,
  startSbxServer,
  uniqueName,
} from '../support/sbx-cli.js'
import { PWS, execIn, removeScopeData, scopeImages, scopeVolumes } from '../support/workspaces.js'

/*
 * Workspace volumes do not leak: `sbx reap --engine` keeps a volume without a sandbox unless told
 * the fleet is gone (`--running`), then removes it after its container; an embedded `sbx serve`
 * removes its sessions' workspaces and its snapshots when it stops (their records die with it).
 */

interface ReapJson {
  removed: string[]
  volumes: { leftovers: { name: string }[]; keptUnused: number }
  removedVolumes: string[]
}

describe('workspace volumes and the engine sweep', () => {
  const fleetScope = uniqueName('wsreap')
  const embeddedScope = uniqueName('wsemb')
  afterAll(async () => {
    await removeScopeData(fleetScope)
    await removeScopeData(embeddedScope)
    await removeScope(fleetScope)
  })

  test('sbx reap --engine keeps a live-looking workspace, removes it with --running --yes', async () => {
    const config = fleetConfig(fleetScope, {
      profiles: { [PWS]: { provider: 'docker', workspace: { persistent: true } } },
    })
    const srv = await startSbxServer('serve', { config })
    await execIn(srv, 'r1', 'echo x > /workspace/x')
    await srv.kill() // the fleet is gone: its sandbox and workspace stay on the engine
    expect(await scopeVolumes(fleetScope)).toHaveLength(1)

    const cwd = configDir({
      queue: { driver: 'bullmq', redisUrl: `redis://127.0.0.1:${await freePort()}`, prefix: fleetScope },
    } as ConfigInput)
    const reap = async (...args: string[]): Promise<ReapJson> => {
      const r = await runSbx(['reap', '--engine', '--json', ...args], { cwd, timeoutMs: 60_000 })
      expect(r.code, r.stderr).toBe(0)
      return JSON.parse(r.stdout) as ReapJson
    }
    // Its container still runs and mounts the volume: without --running nothing of it is listed.
    const plain = await reap('--yes')
    expect(plain.volumes.leftovers).toEqual([])
    expect(plain.removedVolumes).toEqual([])
    expect(await scopeVolumes(fleetScope)).toHaveLength(1)
    // With --running: the unattached container goes, then its workspace.
    const gone = await reap('--running', '--yes')
    expect(gone.removed).toHaveLength(1)
    expect(gone.removedVolumes).toHaveLength(1)
    expect(await scopeVolumes(fleetScope)).toEqual([])
  }, 180_000)

  test('an embedded sbx serve removes its workspaces and snapshots when it stops', async () => {
    const srv = await startSbxServer('serve', {
      config: {
        queue: { prefix: embeddedScope },
        profiles: { [PWS]: { provider: 'docker', workspace: { persistent: true } } },
      },
    })
    await execIn(srv, 'e1', 'echo x > /workspace/x')
    expect((await srv.post('/v1/sessions/e1/snapshots', {})).status).toBe(201)
    expect(await scopeVolumes(embeddedScope)).toHaveLength(2)
    expect((await scopeImages(embeddedScope)).length).toBeGreaterThan(0)
    await srv.stop()
    expect(await scopeVolumes(embeddedScope)).toEqual([])
    expect(await scopeImages(embeddedScope)).toEqual([])
  }, 180_000)
})
