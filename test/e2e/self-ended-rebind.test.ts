import { execFile } from 'node:child_process'
import { promisify } from 'node:util'
import { afterAll, describe, expect, test } from 'vitest'
import {
  fleetConfig,
  removeScopeContainers,
  scopeContainers,
  startSbxServer,
  startSbxWorker,
  uniqueName,
} from '../support/sbx-cli.js'
import type { LineChild, SbxServer } from '../support/sbx-cli.js'

const run = promisify(execFile)

interface Job {
  state: string
  result?: {
    stdout: string
    sandboxId: string
    sandboxReplaced?: { reason: string; filesLost: boolean; previousSandboxId?: string }
  }
}

/**
 * Issue 18 with F5: a fleet (its API and only worker) dies, the session's sandbox ends itself after
 * idleTtlMs + slack, and the session's next call — on a new worker — runs in a fresh sandbox and
 * says the old one (and its files) are gone.
 */
describe('a session whose sandbox ended itself rebinds and says so', () => {
  const scope = uniqueName('selfend')
  const children: { kill(): Promise<void> }[] = []
  afterAll(async () => {
    for (const c of children.reverse()) await c.kill()
    await removeScopeContainers(scope)
  }, 60_000)

  test('the fleet SIGKILLed → the sandbox exits (code 75) → the next call runs in a new sandbox with sandboxReplaced', async () => {
    const config = fleetConfig(scope, {
      providers: { docker: { idleExitSlackMs: 1_000 } },
      // A long pool idle TTL is not what ends the sandbox here: the agent's own idle exit is.
      profiles: { brief: { provider: 'docker', idleTtlMs: 2_000 } },
    })
    const api: SbxServer = await startSbxServer('api', { config })
    children.push(api)
    const first: LineChild = await startSbxWorker({ config })
    children.push(first)
    const body = (command: string) => ({ provider: 'docker', profile: 'brief', sessionId: 's', command })

    const a = (await (await api.post('/v1/exec', body('echo kept > f; cat f'))).json()) as Job
    expect(a.state, JSON.stringify(a)).toBe('completed')
    const [container] = await scopeContainers(scope)
    expect(container).toBeDefined()

    // The whole fleet goes (the API's pool would otherwise evict the idle session itself first).
    await first.kill()
    await api.kill()
    // The engine reports the container's end; bounded by TTL + slack + the agent's look interval.
    const { stdout } = await run('docker', ['wait', container ?? ''], { timeout: 30_000 })
    expect(stdout.trim()).toBe('75')

    const api2: SbxServer = await startSbxServer('api', { config })
    children.push(api2)
    const second = await startSbxWorker({ config })
    children.push(second)
    const b = (await (await api2.post('/v1/exec', body('cat f 2>&1 || echo gone'))).json()) as Job
    expect(b.state, JSON.stringify(b)).toBe('completed')
    expect(b.result?.stdout).toContain('gone')
    expect(b.result?.sandboxId).not.toBe(a.result?.sandboxId)
    expect(b.result?.sandboxReplaced).toMatchObject({ filesLost: true })
    const view = (await (await api2.fetch('/v1/sessions/s')).json()) as { sandboxReplaced?: unknown }
    expect(view.sandboxReplaced).toMatchObject({ filesLost: true })
  }, 120_000)
})
