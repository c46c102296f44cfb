import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import {
  fleetConfig,
  removeScope,
  removeScopeContainers,
  scopeContainers,
  startSbxServer,
  startSbxWorker,
  uniqueName,
} from '../support/sbx-cli.js'
import type { LineChild, SbxServer } from '../support/sbx-cli.js'
import { agentChannel } from '../support/agent-channel.js'

interface JobAnswer {
  state: string
  result?: { exitCode: number | null; stdout: string; stderr: string }
  error?: { code: string; message: string }
}

/**
 * The direct agent channel through the documented commands: where the engine is on this machine,
 * `sbx serve` (and a fleet's `sbx worker`) speak to each sandbox's agent on a Unix socket of their
 * own (the agent's stdin is that socket, not the engine's pipe); the sandbox sees the socket's
 * folder read-only; `providers.docker.agentSocketDir: false` keeps channels on `docker exec`.
 */
describe('the direct agent channel', () => {
  const scope = uniqueName('direct')
  const offScope = uniqueName('direct-off')
  let srv: SbxServer
  let off: SbxServer

  const exec = async (server: SbxServer, sessionId: string, command: string): Promise<JobAnswer> => {
    const res = await server.post('/v1/exec', { provider: 'docker', profile: 'default', sessionId, command })
    const body = (await res.json()) as JobAnswer
    expect(res.status, JSON.stringify(body)).toBe(200)
    return body
  }

  beforeAll(async () => {
    ;[srv, off] = await Promise.all([
      startSbxServer('serve', { config: { queue: { prefix: scope } } }),
      startSbxServer('serve', {
        config: { queue: { prefix: offScope }, providers: { docker: { agentSocketDir: false } } },
      }),
    ])
  }, 180_000)

  afterAll(async () => {
    await Promise.all([srv?.stop(), off?.stop()])
    await Promise.all([removeScopeContainers(scope), removeScopeContainers(offScope)])
  }, 60_000)

  test('sbx serve: commands travel on its own socket, and the sandbox cannot write beside it', async () => {
    const job = await exec(srv, 's1', 'echo hi; touch /run/sbx-agent/x 2>&1; ls -A /run/sbx-agent | wc -l')
    expect(job.state).toBe('completed')
    const [hi, touched, count] = (job.result?.stdout ?? '').trim().split('\n')
    expect(hi).toBe('hi')
    expect(touched).toMatch(/Read-only file system/)
    // The offered socket is removed once the agent connected: nothing is left to connect to.
    expect(count).toBe('0')
    const [container] = await scopeContainers(scope)
    const channel = await agentChannel(container!)
    expect(channel.args).toMatch(/--direct$/)
    expect(channel.stdin).toMatch(/^socket:/)
    // Many commands, large output, and a persistent shell all come back intact on it.
    const big = await exec(
      srv,
      's1',
      'head -c 3000000 /dev/zero | tr "\\0" a | wc -c; seq 1 20000 | tail -n 1',
    )
    expect(big.result?.stdout).toBe('3000000\n20000\n')
  })

  test('agentSocketDir: false keeps the channel on the engine, and commands work the same', async () => {
    const job = await exec(off, 's1', 'echo hi; ls /run/sbx-agent 2>&1 | head -n 1')
    expect(job.state).toBe('completed')
    expect(job.result?.stdout).toMatch(/^hi\n.*No such file or directory/)
    const [container] = await scopeContainers(offScope)
    const channel = await agentChannel(container!)
    expect(channel.args).not.toMatch(/--direct/)
    expect(channel.stdin).toMatch(/^pipe:/)
  })
})

describe('the direct agent channel in a fleet (sbx api + sbx worker)', () => {
  const prefix = uniqueName('direct-fleet')
  let api: SbxServer
  let worker: LineChild

  beforeAll(async () => {
    const config = fleetConfig(prefix)
    api = await startSbxServer('api', { config })
    worker = await startSbxWorker({ config })
  }, 180_000)

  afterAll(async () => {
    await worker?.stop()
    await api?.stop()
    await removeScope(prefix)
  }, 60_000)

  test('the worker beside its engine speaks to the agent on its own socket', async () => {
    const res = await api.post('/v1/exec', {
      provider: 'docker',
      profile: 'default',
      sessionId: 'w1',
      command: 'echo from-the-worker',
    })
    const job = (await res.json()) as JobAnswer
    expect(res.status, JSON.stringify(job)).toBe(200)
    expect(job.result?.stdout).toBe('from-the-worker\n')
    const [container] = await scopeContainers(prefix)
    const channel = await agentChannel(container!)
    expect(channel.args).toMatch(/--direct$/)
    expect(channel.stdin).toMatch(/^socket:/)
  })
})
