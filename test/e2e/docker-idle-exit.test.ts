import { execFile } from 'node:child_process'
import { promisify } from 'node:util'
import { afterAll, describe, expect, test } from 'vitest'
import type { ConfigInput } from '../../src/config/schema.js'
import { RedisServer } from '../support/redis-server.js'
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

/** Short enough for a test, long enough that a live fleet's own bookkeeping is not what ends them. */
const IDLE_TTL_MS = 4_000
const SLACK_MS = 2_000
/** Tolerance: the agent looks every 600 ms here (a tenth of the period); processes take a moment to die. */
const DETECT_MS = 1_000

const profiles = (ttl: number): ConfigInput['profiles'] => ({
  brief: { provider: 'docker', idleTtlMs: ttl, pool: { minIdle: 1, maxSize: 4 } },
})

interface Seen {
  id: string
  /** `sandbox-router.session`: a session hash, or `warm` for an unbound pooled sandbox. */
  session: string
  status: string
  exitCode: number
  /** When the engine saw it stop (ms since epoch; NaN while running). */
  finishedAt: number
}

/** Every container of `scope` (running or not) with its session label and state. */
async function containersOf(scope: string): Promise<Seen[]> {
  const ids = await scopeContainers(scope, true)
  if (ids.length === 0) return []
  const { stdout } = await run('docker', [
    'inspect',
    '-f',
    '{{.Id}} {{index .Config.Labels "sandbox-router.session"}} {{.State.Status}} {{.State.ExitCode}} {{.State.FinishedAt}}',
    ...ids,
  ])
  return stdout
    .split('\n')
    .filter(Boolean)
    .map((line) => {
      const [id = '', session = '', status = '', code = '', finished = ''] = line.split(' ')
      return { id, session, status, exitCode: Number(code), finishedAt: Date.parse(finished) }
    })
}

/** Polls (bounded) until no container of `scope` runs; resolves with the ms it took. */
async function untilNoneRunning(scope: string, boundMs: number): Promise<number> {
  const started = performance.now()
  for (;;) {
    const running = await scopeContainers(scope)
    if (running.length === 0) return performance.now() - started
    if (performance.now() - started > boundMs)
      throw new Error(`${running.length} container(s) of ${scope} still running after ${boundMs} ms`)
    await new Promise((r) => setTimeout(r, 200))
  }
}

/**
 * Issue 18: a Docker sandbox whose fleet is gone (Redis killed for good, workers SIGKILLed) ends
 * itself after its profile's idleTtlMs plus providers.docker.idleExitSlackMs; a sandbox running a
 * command is never ended by this.
 */
describe('Docker sandboxes end themselves when their fleet is gone', () => {
  const scopes: string[] = []
  const children: { kill(): Promise<void> }[] = []
  const redises: RedisServer[] = []
  afterAll(async () => {
    for (const c of children.reverse()) await c.kill()
    for (const r of redises) await r.destroy()
    for (const s of scopes) await removeScopeContainers(s)
  })

  test(
    'Redis SIGKILLed for good and the workers SIGKILLed: 0 running containers after TTL + slack',
    { timeout: 120_000 },
    async () => {
      const redis = await RedisServer.start()
      redises.push(redis)
      const scope = uniqueName('idlex')
      scopes.push(scope)
      const config: ConfigInput = {
        queue: { driver: 'bullmq', redisUrl: redis.url, prefix: scope },
        providers: { docker: { enabled: true, idleExitSlackMs: SLACK_MS } },
        profiles: profiles(IDLE_TTL_MS),
      } as ConfigInput
      const api: SbxServer = await startSbxServer('api', { config })
      children.push(api)
      const workers: LineChild[] = []
      for (let i = 0; i < 2; i++) {
        const w = await startSbxWorker({ config })
        children.push(w)
        workers.push(w)
      }
      const res = await api.post('/v1/exec', {
        provider: 'docker',
        profile: 'brief',
        sessionId: 'orphan',
        command: 'echo kept > /workspace/f; echo bound',
      })
      const job = (await res.json()) as { state: string; result?: { stdout: string } }
      expect(job.state).toBe('completed')
      expect(job.result?.stdout).toBe('bound\n')
      const before = await containersOf(scope)
      const session = before.find((c) => c.status === 'running' && c.session !== 'warm')
      expect(session, JSON.stringify(before)).toBeDefined()

      const killedAt = Date.now() // the engine's clock is this machine's: FinishedAt compares
      await redis.kill9()
      await Promise.all([...workers.map((w) => w.kill()), api.kill()])
      const idleExitMs = IDLE_TTL_MS + SLACK_MS
      await untilNoneRunning(scope, idleExitMs + 20_000)
      const after = await containersOf(scope)
      // A container a worker was creating when it died never started ("created"): it holds nothing.
      const ended = after.filter((c) => c.status !== 'created')
      const stoppedAfterMs = ended.map((c) => c.finishedAt - killedAt)
      console.log(
        `[figure] ${ended.length} sandbox(es) (session + warm) stopped ${stoppedAfterMs.join(', ')} ms after ` +
          `Redis was SIGKILLed (the workers right after) (idleTtlMs ${IDLE_TTL_MS} + idleExitSlackMs ${SLACK_MS} = ${idleExitMs} ms)`,
      )
      // Each ended itself (the agent's exit code 75), and no earlier than its idle period allows.
      expect(ended.map((c) => [c.status, c.exitCode])).toEqual(ended.map(() => ['exited', 75]))
      expect(ended.some((c) => c.id === session?.id)).toBe(true)
      for (const ms of stoppedAfterMs) {
        expect(ms).toBeGreaterThanOrEqual(idleExitMs - DETECT_MS)
        expect(ms).toBeLessThanOrEqual(idleExitMs + DETECT_MS + 4_000) // generous: a loaded machine
      }
    },
  )

  test(
    'a session running a command for longer than TTL + slack is not ended',
    { timeout: 120_000 },
    async () => {
      const scope = uniqueName('idlel')
      scopes.push(scope)
      const ttl = 3_000
      const config = fleetConfig(scope, {
        providers: { docker: { enabled: true, idleExitSlackMs: 1_000 } },
        profiles: profiles(ttl),
      } as Partial<ConfigInput>)
      const api = await startSbxServer('api', { config })
      children.push(api)
      children.push(await startSbxWorker({ config }))
      // Two and a half times the sandbox's idle-exit period (4 s), in one command.
      const res = await api.post('/v1/exec', {
        provider: 'docker',
        profile: 'brief',
        sessionId: 'busy',
        command: 'echo mark > /workspace/m; sleep 10; echo survived',
        timeoutMs: 60_000,
      })
      const job = (await res.json()) as { state: string; result?: { exitCode: number; stdout: string } }
      expect(job.state).toBe('completed')
      expect(job.result).toMatchObject({ exitCode: 0, stdout: 'survived\n' })
      // The same sandbox (its file is there) answers the next command: it was never ended, and its
      // main process is the agent with the idle exit armed.
      const again = await api.post('/v1/exec', {
        provider: 'docker',
        profile: 'brief',
        sessionId: 'busy',
        command: 'cat /workspace/m; tr "\\0" " " < /proc/1/cmdline',
      })
      const second = (await again.json()) as { state: string; result?: { stdout: string } }
      expect(second.state).toBe('completed')
      expect(second.result?.stdout).toBe(`mark\n/.sbx-agent/sbx-agent --init --idle-exit-ms ${ttl + 1_000} `)
    },
  )
})
