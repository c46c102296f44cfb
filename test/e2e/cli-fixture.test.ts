import { afterAll, describe, expect, test } from 'vitest'
import {
  fleetConfig,
  removeScopeContainers,
  startSbxServer,
  startSbxWorker,
  uniqueName,
} from '../support/sbx-cli.js'
import type { LineChild, SbxServer } from '../support/sbx-cli.js'

/** The documented entry points answer a routed command: `sbx serve` alone, and `sbx api` + `sbx worker`. */
describe('sbx serve / api + worker as child processes', () => {
  const started: { stop(): Promise<void> }[] = []
  const scopes: string[] = []
  afterAll(async () => {
    for (const s of started.reverse()) await s.stop()
    for (const scope of scopes) await removeScopeContainers(scope)
  })

  const exec = async (srv: SbxServer, command: string) => {
    const res = await srv.post('/v1/exec', {
      provider: 'docker',
      profile: 'default',
      sessionId: 's1',
      command,
    })
    expect(res.status).toBe(200)
    return (await res.json()) as { state: string; result?: { exitCode: number; stdout: string } }
  }

  test('sbx serve runs a command in a session sandbox', async () => {
    const prefix = uniqueName('clife')
    scopes.push(prefix)
    const srv = await startSbxServer('serve', { config: { queue: { prefix } } })
    started.push(srv)
    const job = await exec(srv, 'echo hi > a; cat a')
    expect(job.state).toBe('completed')
    expect(job.result?.stdout).toBe('hi\n')
  })

  test('sbx api + sbx worker run a command on the shared Redis', async () => {
    const prefix = uniqueName('clifw')
    scopes.push(prefix)
    const config = fleetConfig(prefix)
    const api = await startSbxServer('api', { config })
    started.push(api)
    const worker: LineChild = await startSbxWorker({ config })
    started.push(worker)
    const job = await exec(api, 'echo fleet')
    expect(job.state).toBe('completed')
    expect(job.result?.stdout).toBe('fleet\n')
  })
})
