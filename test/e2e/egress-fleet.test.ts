import { createServer, type Server } from 'node:http'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { fleetConfig, removeScope, startSbxServer, startSbxWorker, uniqueName } from '../support/sbx-cli.js'
import type { LineChild, SbxServer } from '../support/sbx-cli.js'

/**
 * An allowlist profile in fleet mode (`sbx api` + `sbx worker` on the shared Redis): the worker that
 * creates the sandbox runs its proxy; when that worker is gone, the next worker to reach the
 * sandbox takes its proxy socket over, with the same policy (read back from the container).
 */
describe('egress allowlist through sbx api + sbx worker', () => {
  const scope = uniqueName('egress-fleet')
  const key = `sbx_test_${uniqueName('k').replace(/-/g, '')}`
  let api: SbxServer
  let worker: LineChild
  let server: Server
  let port = 0
  let config: ReturnType<typeof fleetConfig>

  beforeAll(async () => {
    server = createServer((_req, res) => res.end('fleet-allowed\n'))
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r))
    const a = server.address()
    port = typeof a === 'object' && a ? a.port : 0
    config = fleetConfig(scope, {
      profiles: { allowlist: { provider: 'docker', network: { allow: [`localhost:${port}`] } } },
    })
    ;[api, worker] = await Promise.all([
      startSbxServer('api', { config, env: { SBX_API_KEY: key } }),
      startSbxWorker({ config }),
    ])
  }, 180_000)

  afterAll(async () => {
    await Promise.allSettled([api?.stop(), worker?.stop()])
    await removeScope(scope)
    server?.close()
  }, 60_000)

  const exec = async (command: string): Promise<string> => {
    const res = await api.post('/v1/exec', {
      provider: 'docker',
      profile: 'allowlist',
      sessionId: 'fs',
      command,
    })
    const body = (await res.json()) as { result?: { stdout: string; stderr: string } }
    if (!body.result) throw new Error(JSON.stringify(body))
    return body.result.stdout + body.result.stderr
  }

  test('allowed through the first worker, and through the next one after it stopped', async () => {
    expect(await exec(`touch /workspace/made-here && wget -q -O - http://localhost:${port}/`)).toBe(
      'fleet-allowed\n',
    )
    await worker.stop()
    worker = await startSbxWorker({ config })
    // the same sandbox (its file is there), reached through the new worker's proxy
    expect(await exec(`ls /workspace/made-here && wget -q -O - http://localhost:${port}/`)).toBe(
      '/workspace/made-here\nfleet-allowed\n',
    )
    const denied = await exec(
      `exec 3<>/dev/tcp/127.0.0.1/3128 && printf 'GET http://localhost:1/ HTTP/1.1\\r\\nHost: localhost:1\\r\\n\\r\\n' >&3 && cat <&3`,
    )
    expect(denied).toContain('sbx egress refused localhost:1')
  }, 180_000)
})
