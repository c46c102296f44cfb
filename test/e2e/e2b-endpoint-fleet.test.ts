import { Sandbox } from 'e2b'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import type { LineChild } from '../fault/fixtures/redis-child.js'
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
 * e2b SDK creates a sandbox, runs a command, writes and reads a file, lists and kills it.
 */
describe('E2B-compatible endpoint through sbx api + sbx worker (fleet)', () => {
  const scope = uniqueName('e2bfleet')
  let api: SbxServer
  let worker: LineChild

  beforeAll(async () => {
    const config = fleetConfig(scope, { quotas: { requestsPerSecond: 1000 } })
    const cwd = configDir(config)
    const env = { SBX_API_KEY: `sbx_e2bfleet_${'f'.repeat(24)}` }
    api = await startSbxServer('api', { config, cwd, env })
    worker = await startSbxWorker({ config, cwd, env })
  }, 180_000)

  afterAll(async () => {
    await worker?.stop()
    await api?.stop()
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
    } finally {
      expect(await sbx.kill()).toBe(true)
    }
  }, 120_000)
})
