import { FilesystemEventType, Sandbox } from 'e2b'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import type { LineChild } from '../support/redis-child.js'
import {
  configDir,
  fleetConfig,
  removeScope,
  startSbxServer,
  startSbxWorker,
  uniqueName,
} from '../support/sbx-cli.js'
import type { SbxServer } from '../support/sbx-cli.js'

/**
 * The E2B-compatible endpoint of `sbx api` in fleet mode (a worker beside it, Redis between): the
 * e2b SDK creates a sandbox, runs a command, writes and reads a file, lists and kills it; with two
 * API replicas, a sandbox created through one is served whole by the other (its E2B side is in Redis),
 * its signed file URLs included; watches and file metadata work through the worker's sandboxes.
 */
describe('E2B-compatible endpoint through sbx api + sbx worker (fleet)', () => {
  const scope = uniqueName('e2bfleet')
  let api: SbxServer
  let api2: SbxServer
  let worker: LineChild

  beforeAll(async () => {
    const config = fleetConfig(scope, { quotas: { requestsPerSecond: 1000 } })
    const cwd = configDir(config)
    const env = { SBX_API_KEY: `sbx_e2bfleet_${'f'.repeat(24)}` }
    api = await startSbxServer('api', { config, cwd, env })
    api2 = await startSbxServer('api', { config, cwd, env })
    worker = await startSbxWorker({ config, cwd, env })
  }, 180_000)

  afterAll(async () => {
    await worker?.stop()
    await api?.stop()
    await api2?.stop()
    await removeScope(scope)
  }, 120_000)

  test('create, run, files, list, kill', async () => {
    const conn = { apiUrl: api.url, sandboxUrl: api.url, apiKey: api.key }
    const sbx = await Sandbox.create('base', { ...conn, metadata: { suite: scope } })
    try {
      expect(await sbx.commands.run('echo fleet')).toMatchObject({ stdout: 'fleet\n', exitCode: 0 })
      await sbx.files.write('/tmp/f.txt', 'fleet file')
      expect(await sbx.files.read('/tmp/f.txt')).toBe('fleet file')
      const listed = await Sandbox.list({ ...conn, query: { metadata: { suite: scope } } }).nextItems()
      expect(listed.map((s) => s.sandboxId)).toEqual([sbx.sandboxId])
      // The workers hold the sandboxes, not this process: pause says it cannot here.
      await expect(sbx.pause()).rejects.toThrow(
        /pause is not supported: provider 'docker' .*cannot pause sandboxes here/,
      )
    } finally {
      expect(await sbx.kill()).toBe(true)
    }
  }, 120_000)

  test('two API replicas: a sandbox created through one is connected, run, listed, timed out and killed through the other', async () => {
    const one = { apiUrl: api.url, sandboxUrl: api.url, apiKey: api.key }
    const two = { apiUrl: api2.url, sandboxUrl: api2.url, apiKey: api2.key }
    const created = await Sandbox.create('base', { ...one, metadata: { suite: scope, replica: 'x' } })
    const bg = await created.commands.run('read line; echo got $line', { background: true, stdin: true })
    const other = await Sandbox.connect(created.sandboxId, two)
    expect(await other.commands.run('pwd')).toMatchObject({ stdout: '/home/user\n', exitCode: 0 })
    // The process started through the first replica, by pid, through the second.
    const listed = await other.commands.list()
    expect(listed.map((p) => p.pid)).toContain(bg.pid)
    const handle = await other.commands.connect(bg.pid)
    await other.commands.sendStdin(bg.pid, 'hello\n')
    expect((await handle.wait()).stdout).toContain('got hello')
    const found = await Sandbox.list({ ...two, query: { metadata: { replica: 'x' } } }).nextItems()
    expect(found.map((s) => s.sandboxId)).toEqual([created.sandboxId])
    // A lifetime set through the second replica ends the sandbox (whichever replica sweeps).
    await other.setTimeout(1_000)
    await expect
      .poll(
        async () =>
          (await Sandbox.list({ ...one, query: { metadata: { replica: 'x' } } }).nextItems()).length,
        {
          timeout: 15_000,
        },
      )
      .toBe(0)
    expect(await Sandbox.kill(created.sandboxId, two)).toBe(false)
  }, 120_000)

  test("files through the fleet: a watch's event, metadata, and a signed URL made through one replica used at the other", async () => {
    const sbx = await Sandbox.create('base', {
      apiUrl: api.url,
      sandboxUrl: api.url,
      apiKey: api.key,
      metadata: { suite: scope },
    })
    try {
      await sbx.files.makeDir('w')
      let wrote!: () => void
      const written = new Promise<void>((resolve) => (wrote = resolve))
      const handle = await sbx.files.watchDir('w', (e) => {
        if (e.type === FilesystemEventType.WRITE && e.name === 'a.txt') wrote()
      })
      const info = await sbx.files.write('w/a.txt', 'fleet data', { metadata: { via: 'fleet' } })
      expect(info.metadata).toEqual({ via: 'fleet' })
      await written
      await handle.stop()
      expect((await sbx.files.getInfo('w/a.txt')).metadata).toEqual({ via: 'fleet' })
      // The URL names no sandbox (E2B_SANDBOX_URL's form): the other replica finds the sandbox whose
      // token signed it among the records in Redis.
      const url = new URL(await sbx.downloadUrl('w/a.txt', { useSignatureExpiration: 60 }))
      const atTwo = new URL(url.pathname + url.search, api2.url)
      const r = await fetch(atTwo)
      expect([r.status, await r.text()]).toEqual([200, 'fleet data'])
    } finally {
      await sbx.kill()
    }
  }, 120_000)
})
