import { randomUUID } from 'node:crypto'
import { performance } from 'node:perf_hooks'
import { setTimeout as delay } from 'node:timers/promises'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { createDockerProvider } from '../../providers/docker/index.js'
import type { DockerProvider } from '../../providers/docker/index.js'
import type { AppError } from '../../src/errors.js'
import { createJobQueue } from '../../src/queue/index.js'
import type { ExecJob, ExecJobResult, JobQueue } from '../../src/queue/index.js'
import { QueueRouteExecutor } from '../../src/routing/index.js'
import type { RouteRequest } from '../../src/routing/index.js'
import { ProviderRegistry } from '../../src/sandbox/registry.js'
import { POOL_LABELS } from '../../src/sessions/index.js'
import { PROFILES } from '../support/queue-world.js'
import { startWorkerProcess } from '../support/redis-child.js'
import type { FaultNames, LineChild } from '../support/redis-child.js'
import { FLEET_DRIVER } from '../support/redis.js'
import { RedisServer } from '../support/redis-server.js'

/*
 * Redis SIGKILLed and restarted (same port, same AOF directory, appendfsync always) while producers in
 * this process stream routed commands to two worker processes. Every command appends its callId to a
 * file in its session's sandbox, so runs are counted where they happen, not where they are reported.
 * Two outages: a short one (well inside the 4 s job lock) and a long one (past lock expiry and a
 * stalled-job check, so jobs in flight at the kill go through redelivery and their fence).
 */

const SESSIONS = ['s0', 's1', 's2']
/** Pause between one producer loop's submissions (ms): a steady stream, not a flood. */
const TICK_MS = 120
/** While Redis is up, a loop waits when this many of its jobs are unfinished. */
const MAX_OUTSTANDING_PER_LOOP = 6
/** A submission must settle within this while Redis is down (fail fast, never hang). */
const FAIL_FAST_MS = 2_000
/** Redis back → first job completed, on this shared 2-core machine. */
const RECOVERY_TARGET_MS = 15_000
/** The outages, as refused submissions the producers must see before Redis comes back. */
const OUTAGES = [
  { name: 'short', refusals: 12 },
  // ~200 × TICK_MS / 3 loops ≈ 8 s: past the 4 s lock and the 1.5 s stalled check.
  { name: 'long', refusals: 200 },
]

interface Tracked {
  readonly job: ExecJob
  readonly acceptedAt: number
  outcome?: { readonly result?: ExecJobResult; readonly error?: unknown; readonly at: number }
}

interface Refusal {
  readonly code: string
  readonly message: string
  readonly ms: number
}

interface OutageReport {
  name: string
  /** Accepted jobs without a result when Redis died (queued or running): all must finish after it. */
  pendingAtKill: number
  /** Commands running on the workers when Redis died. */
  inFlightAtKill: number
  refused: number
  slowestRefusalMs: number
  downMs: number
  /** Redis answering PING again → the first submission accepted after that. */
  firstAcceptedMs: number
  /** Redis answering PING again → the first command started on a worker after that. */
  firstStartMs: number
  /** Redis answering PING again → the first job completed after that. */
  recoveryMs: number
}

const id = randomUUID().slice(0, 8)
const names: FaultNames = { scope: `rf-${id}`, queuePrefix: `rfq-${id}`, sessionPrefix: `rfs-${id}:` }

let redis: RedisServer | undefined
let workers: LineChild[] = []
let queue: JobQueue | undefined
let docker: DockerProvider | undefined

const containers = async (d: DockerProvider): Promise<string[]> =>
  (
    await d.docker.listContainers({
      all: true,
      filters: { label: [`${POOL_LABELS.scope}=${names.scope}`] },
    })
  ).map((c) => c.Id)

beforeAll(async () => {
  redis = await RedisServer.start()
  docker = createDockerProvider({ instanceId: names.scope })
  const url = redis.url
  workers = await Promise.all(
    ['wa', 'wb'].map((w) =>
      startWorkerProcess(url, names, `${w}-${id}`, { SBX_CONCURRENCY: '4', SBX_QUEUE_DRIVER: FLEET_DRIVER }),
    ),
  )
  queue = await createJobQueue({
    driver: FLEET_DRIVER,
    redisUrl: url,
    prefix: names.queuePrefix,
    queueName: 'exec',
  })
}, 180_000)

afterAll(async () => {
  const d = docker
  try {
    // Workers drain and close against a live Redis.
    if (redis && !redis.running) await redis.launch()
    await Promise.all(workers.map((w) => w.stop()))
    await queue?.close()
    if (d) {
      for (const c of await containers(d)) await d.destroy({ providerId: 'docker', id: c, profile: '' })
      expect(await containers(d)).toEqual([])
    }
  } finally {
    await Promise.all(workers.map((w) => w.kill()))
    await d?.close()
    await redis?.destroy()
  }
}, 180_000)

describe(`Redis SIGKILLed and restarted with AOF under load (queue driver ${FLEET_DRIVER})`, () => {
  test('no accepted job is lost, duplicates stay bounded, workers and producers recover without a restart', async () => {
    const q = queue as JobQueue
    const server = redis as RedisServer
    const registry = new ProviderRegistry().register(docker as DockerProvider).addProfiles(PROFILES)
    const executor = new QueueRouteExecutor({ queue: q, targets: registry, defaultTenant: 'acme' })
    const route = (sessionId: string, n: number, over: Partial<RouteRequest> = {}): RouteRequest => {
      const callId = `c-${sessionId}-${n}`
      return {
        providerId: 'docker',
        profile: 'default',
        command: `echo ${callId} >> calls; sleep 0.2; echo ok`,
        callId,
        toolName: 'bash',
        sessionId,
        tenant: 'acme',
        // Half the stream may run again after a redelivery; the other half must not.
        idempotent: n % 2 === 0,
        timeoutMs: 20_000,
        ...over,
      }
    }
    // Every session's sandbox exists before the stream starts.
    for (const s of SESSIONS) {
      const warm = await executor.execute(route(s, 0, { callId: `warm-${s}`, command: 'echo warm' }))
      expect(warm.stdout).toBe('warm\n')
    }
    const pids = workers.map((w) => w.pid)

    const tracked: Tracked[] = []
    const refusals: Refusal[] = []
    let down = false
    let stop = false
    const wake: (() => void)[] = []
    const notify = (): void => {
      for (const f of wake.splice(0)) f()
    }
    const until = async (cond: () => boolean): Promise<void> => {
      while (!cond()) await new Promise<void>((r) => wake.push(r))
    }
    const loop = async (sessionId: string): Promise<void> => {
      let n = 1
      let outstanding = 0
      while (!stop) {
        // While Redis is away every attempt is made (each must be refused fast).
        if (down || outstanding < MAX_OUTSTANDING_PER_LOOP) {
          const job = executor.buildJob(route(sessionId, n))
          const t0 = performance.now()
          try {
            await q.submit(job)
            n += 1
            const t: Tracked = { job, acceptedAt: performance.now() }
            tracked.push(t)
            outstanding += 1
            q.wait(job.jobId, { timeoutMs: 180_000 })
              .then(
                (result) => (t.outcome = { result, at: performance.now() }),
                (error: unknown) => (t.outcome = { error, at: performance.now() }),
              )
              .finally(() => {
                outstanding -= 1
                notify()
              })
          } catch (err) {
            const e = err as AppError
            refusals.push({ code: e.code, message: e.message, ms: performance.now() - t0 })
          }
          notify()
        }
        await delay(TICK_MS)
      }
    }

    const outage = async (name: string, refusalsWanted: number): Promise<OutageReport> => {
      // Kill mid-stream: 20 more jobs accepted, then at the next command start on a worker.
      const target = tracked.length + 20
      await until(() => tracked.length >= target)
      const from = workers.map((w) => w.lines.length)
      await Promise.race(workers.map((w, i) => w.next((l) => l.json?.['event'] === 'start', 60_000, from[i])))
      const inFlightAtKill = workers.reduce(
        (sum, w) => sum + w.jsonEvents('start').length - w.jsonEvents('end').length,
        0,
      )
      const refusedBefore = refusals.length
      const pendingAtKill = tracked.filter((t) => !t.outcome).length
      down = true
      const killedAt = await server.kill9()
      await until(() => refusals.length - refusedBefore >= refusalsWanted)
      const backAt = await server.launch()
      down = false
      const refused = refusals.slice(refusedBefore)
      // Recovery: the first job that completes after Redis answers again.
      const acceptedBefore = tracked.length
      await until(() =>
        tracked.some((t) => t.outcome?.result?.status === 'completed' && t.outcome.at > backAt),
      )
      const firstDone = Math.min(
        ...tracked
          .filter((t) => t.outcome?.result?.status === 'completed' && t.outcome.at > backAt)
          .map((t) => t.outcome?.at ?? Infinity),
      )
      // The stream goes on after the restart.
      await until(() => tracked.length >= acceptedBefore + 20)
      const firstStart = Math.min(
        ...workers.flatMap((w) =>
          w
            .jsonEvents('start')
            .filter((l) => l.at > backAt)
            .map((l) => l.at),
        ),
      )
      return {
        name,
        pendingAtKill,
        inFlightAtKill,
        refused: refused.length,
        slowestRefusalMs: Math.round(Math.max(...refused.map((r) => r.ms))),
        downMs: Math.round(backAt - killedAt),
        firstAcceptedMs: Math.round(
          Math.min(...tracked.filter((t) => t.acceptedAt > backAt).map((t) => t.acceptedAt)) - backAt,
        ),
        firstStartMs: Math.round(firstStart - backAt),
        recoveryMs: Math.round(firstDone - backAt),
      }
    }

    const loops = SESSIONS.map((s) => loop(s))
    const outages: OutageReport[] = []
    try {
      for (const o of OUTAGES) outages.push(await outage(o.name, o.refusals))
    } finally {
      stop = true
      await Promise.all(loops)
    }
    // Every accepted job's wait settles.
    await until(() => tracked.every((t) => t.outcome))

    const final = await Promise.all(tracked.map(async (t) => ({ t, stored: await q.getResult(t.job.jobId) })))
    // Runs, counted in the sandboxes.
    const runs = new Map<string, number>()
    for (const s of SESSIONS) {
      const out = await executor.execute(route(s, 0, { callId: `count-${s}`, command: 'cat calls' }))
      for (const l of out.stdout.split('\n').filter(Boolean)) runs.set(l, (runs.get(l) ?? 0) + 1)
    }
    const ran = (t: Tracked): number => runs.get(t.job.callId) ?? 0
    const byStatus: Record<string, number> = {}
    for (const f of final) {
      const k = f.stored?.status ?? 'lost'
      byStatus[k] = (byStatus[k] ?? 0) + 1
    }
    const duplicated = tracked.filter((t) => ran(t) > 1)
    const report = {
      accepted: tracked.length,
      refusedWhileDown: refusals.length,
      byStatus,
      lost: final.filter((f) => !f.stored).length,
      duplicates: duplicated.reduce((sum, t) => sum + ran(t) - 1, 0),
      duplicatedNonIdempotent: duplicated.filter((t) => !t.job.idempotent).length,
      interruptedThatRan: final.filter((f) => f.stored?.status === 'interrupted' && ran(f.t) > 0).length,
      outages,
      workerErrorLines: workers.map((w) => w.jsonEvents('error').length),
    }
    console.log(`[redis-restart] ${JSON.stringify(report, null, 2)}`)
    const odd = final.filter((f) => f.stored?.status !== 'completed' || ran(f.t) !== 1)
    for (const f of odd.slice(0, 10))
      console.log(
        `[redis-restart] ${f.t.job.callId} idempotent=${f.t.job.idempotent} runs=${ran(f.t)} ` +
          `${JSON.stringify(f.stored)}\n` +
          workers
            .flatMap((w) =>
              w.lines.filter((l) => l.text.includes(f.t.job.jobId)).map((l) => `  ${w.name}: ${l.text}`),
            )
            .join('\n'),
      )

    // Lost: none. Every accepted job has its result in the queue and its producer got it.
    expect(report.lost).toBe(0)
    expect(tracked.filter((t) => t.outcome?.error)).toEqual([])
    for (const f of final) {
      expect(['completed', 'interrupted'], JSON.stringify(f.stored)).toContain(f.stored?.status)
      if (f.stored?.status === 'completed') expect(ran(f.t), f.t.job.callId).toBeGreaterThanOrEqual(1)
      if (f.stored?.status === 'interrupted') expect(f.stored.message).toMatch(/may have run/)
    }
    // Duplicates: only idempotent routes run twice, at most once more each, at most one per job in flight.
    expect(report.duplicatedNonIdempotent).toBe(0)
    expect(Math.max(0, ...tracked.map(ran))).toBeLessThanOrEqual(2)
    expect(report.duplicates).toBeLessThanOrEqual(outages.reduce((s, o) => s + o.inFlightAtKill, 0))
    // While Redis was away: refused fast, with the code and a message.
    expect(refusals.length).toBeGreaterThan(0)
    for (const r of refusals) {
      expect(r.code).toBe('QUEUE_UNAVAILABLE')
      expect(r.message).toMatch(/Redis is unreachable/)
      expect(r.ms).toBeLessThan(FAIL_FAST_MS)
    }
    // Recovery, without restarting anything.
    for (const o of outages) expect(o.recoveryMs).toBeLessThan(RECOVERY_TARGET_MS)
    expect(workers.map((w) => [w.alive, w.pid])).toEqual(pids.map((p) => [true, p]))
  }, 600_000)
})
