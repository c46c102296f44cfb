/**
 * Load through the fleet: ≥2 worker processes (each: Docker provider + Redis session store + session
 * pool + BullMQ queue + exec worker, see bench/load/worker.ts) and a producer in this process that
 * submits `sessions × commands` routed commands over BullMQ, `concurrency` at a time, each session's
 * commands in order (as an agent issues them). Every command does real work in its session's sandbox:
 * appends its id to the session's `effects` file, counts and hashes the file, and echoes the result.
 *
 * Run 1 (no fault) reports throughput, p50/p99 latency, errors (must be 0), sandboxes created vs
 * reused (the workers' pool counters, and the run's containers), and Redis memory (the run's keys and
 * their MEMORY USAGE; INFO used_memory before/peak/after). Run 2 (`--kill`, on by default) does the
 * same and SIGKILLs one worker once half the commands completed (mid-command): jobs accepted, completed,
 * interrupted (the fence's verdict for a non-idempotent command its worker died in), lost (must be
 * 0), duplicates (from the side-effect files: an id appended twice), and recovery time (SIGKILL → the
 * last job the dead worker held has its outcome). Every container and Redis key a run created is
 * removed, and the leftovers (must be 0) are printed.
 *
 *   npx tsx bench/load.ts                       # needs the Docker engine and Redis (REDIS_URL)
 *   npx tsx bench/load.ts --workers 3 --sessions 32 --commands 40 --concurrency 16 --no-kill
 *
 * Flags: --workers 2 --sessions 16 --commands 20 --concurrency 8 --worker-concurrency 8 --work-ms 0
 * (a sleep added to every command) --kill / --no-kill --kill-delay-ms 5 (the victim dies this long
 * into the next job it starts) --idempotent (routes may re-run: duplicates are then allowed)
 * --run-timeout 60 (seconds per run; past it the run is aborted: its commands are cancelled, it is
 * cleaned up and the bench exits 1).
 */
import { randomUUID } from 'node:crypto'
import { setMaxListeners } from 'node:events'
import { parseArgs } from 'node:util'
import { Redis } from 'ioredis'
import { createDockerProvider } from '../providers/docker/index.js'
import type { DockerProvider } from '../providers/docker/index.js'
import { AppError } from '../src/errors.js'
import { createBullmqJobQueue } from '../src/queue/index.js'
import type { JobQueue } from '../src/queue/index.js'
import { JobInterruptedError, QueueRouteExecutor } from '../src/routing/index.js'
import type { RouteRequest } from '../src/routing/index.js'
import { ProfileCatalog, resolveProfile } from '../src/sandbox/profiles.js'
import { POOL_LABELS } from '../src/sessions/index.js'
import {
  deleteRunKeys,
  prefixMemory,
  runNames,
  sampleUsedMemory,
  scanKeys,
  usedMemory,
  WorkerProc,
  keyPatterns,
} from './load/fleet.js'
import type { PoolFigures, RunNames } from './load/fleet.js'
import { LOAD_PROFILE, loadProfile } from './load/profile.js'
import { percentile } from './lib/percentile.js'

const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379'
const TENANT = 'load'

const { values: flags } = parseArgs({
  options: {
    workers: { type: 'string', default: '2' },
    sessions: { type: 'string', default: '16' },
    commands: { type: 'string', default: '20' },
    concurrency: { type: 'string', default: '8' },
    'worker-concurrency': { type: 'string', default: '8' },
    'work-ms': { type: 'string', default: '0' },
    'kill-delay-ms': { type: 'string', default: '5' },
    kill: { type: 'boolean', default: true },
    'no-kill': { type: 'boolean', default: false },
    idempotent: { type: 'boolean', default: false },
    'run-timeout': { type: 'string', default: '60' },
  },
  strict: true,
})

function intFlag(name: keyof typeof flags, min: number, max: number): number {
  const raw = flags[name]
  const n = Number(raw)
  if (!Number.isInteger(n) || n < min || n > max) {
    console.error(`--${name} must be an integer in [${min}, ${max}], got ${String(raw)}`)
    process.exit(2)
  }
  return n
}

const opts = {
  workers: intFlag('workers', 2, 16),
  sessions: intFlag('sessions', 1, 512),
  commands: intFlag('commands', 1, 10_000),
  concurrency: intFlag('concurrency', 1, 512),
  workerConcurrency: intFlag('worker-concurrency', 1, 256),
  workMs: intFlag('work-ms', 0, 60_000),
  killDelayMs: intFlag('kill-delay-ms', 0, 60_000),
  runTimeoutS: intFlag('run-timeout', 5, 3_600),
  kill: flags.kill === true && flags['no-kill'] !== true,
  idempotent: flags.idempotent === true,
}

type Status = 'completed' | 'interrupted' | 'failed' | 'bad-output' | 'no-outcome'

interface CommandRecord {
  readonly session: number
  readonly index: number
  /** The side-effect id the command appends to `effects`. */
  readonly effect: string
  readonly jobId: string
  accepted: boolean
  status?: Status
  code?: string
  /** Worker that first started it (interrupted reports). */
  startedBy?: string
  t0: number
  t1: number
}

interface RunReport {
  readonly label: string
  readonly aborted: boolean
  readonly total: number
  readonly accepted: number
  readonly byStatus: Record<Status, number>
  readonly failCodes: Record<string, number>
  readonly seconds: number
  readonly throughput: number
  /** Completions per second after every session was bound (its first command done). */
  readonly steadyThroughput: number
  /** Latency of warm commands (a session's 2nd and later). */
  readonly p50: number
  readonly p99: number
  /** Latency of a session's first command (binds a sandbox: a create). */
  readonly coldP50: number
  readonly coldP99: number
  readonly lost: number
  readonly duplicates: number
  readonly unknownEffects: number
  readonly interruptedRan: number
  /** Interrupted jobs whose fence record names the killed worker. */
  readonly interruptedByVictim: number
  readonly redelivered: number
  readonly pool: PoolFigures
  readonly containersSeen: number
  readonly redisKeys: number
  readonly redisBytes: number
  readonly usedBefore: number
  readonly usedPeak: number
  readonly usedAfter: number
  readonly kill?: {
    readonly victim: string
    readonly atCompleted: number
    /** Jobs the victim had started or taken whose outcome the producer had not received at the kill. */
    readonly held: number
    readonly heldOutcomes: Record<string, number>
    /** SIGKILL → the first / last held job's outcome at the producer. */
    readonly firstOutcomeMs: number
    readonly recoveryMs: number
  }
  readonly leftContainers: number
  readonly leftKeys: number
}

/** The shell command of one (session, index): real work in the sandbox, and a checkable answer. */
function commandFor(effect: string): string {
  const work = opts.workMs > 0 ? `sleep ${(opts.workMs / 1000).toFixed(3)}; ` : ''
  return (
    `${work}echo ${effect} >> effects; n=$(wc -l < effects); ` +
    `h=$(sha256sum effects | cut -c1-16); echo "ok ${effect} $n $h"`
  )
}

/** The producer's queue, counting the jobs it accepted. */
function countingQueue(q: JobQueue, accepted: Set<string>): JobQueue {
  return {
    driver: q.driver,
    submit: async (job) => {
      const r = await q.submit(job)
      accepted.add(job.jobId)
      return r
    },
    submitOrGet: async (job, o) => {
      const r = await q.submitOrGet(job, o)
      accepted.add(job.jobId)
      return r
    },
    wait: (jobId, o) => q.wait(jobId, o),
    getResult: (jobId) => q.getResult(jobId),
    inspect: (jobId) => q.inspect(jobId),
    readOutput: (jobId) => q.readOutput(jobId),
    list: (tenant, o) => q.list(tenant, o),
    counts: () => q.counts(),
    subscribeOutput: (jobId, l) => q.subscribeOutput(jobId, l),
    cancel: (jobId, reason) => q.cancel(jobId, reason),
    consume: (p, o) => q.consume(p, o),
    close: () => q.close(),
  }
}

async function containersOf(docker: DockerProvider, names: RunNames): Promise<string[]> {
  const list = await docker.docker.listContainers({
    all: true,
    filters: { label: [`${POOL_LABELS.scope}=${names.scope}`] },
  })
  return list.map((c) => c.Id)
}

async function run(label: string, kill: boolean, docker: DockerProvider, redis: Redis): Promise<RunReport> {
  const names = runNames()
  const total = opts.sessions * opts.commands
  const abort = new AbortController()
  // Every command in flight (and the checks after the run) listens on the run's signal.
  setMaxListeners(opts.concurrency + opts.sessions + 16, abort.signal)
  const deadline = setTimeout(
    () => abort.abort(`the run passed --run-timeout ${opts.runTimeoutS} s`),
    opts.runTimeoutS * 1000,
  )
  const onSigint = (): void => abort.abort('SIGINT')
  process.once('SIGINT', onSigint)
  const usedBefore = await usedMemory(redis)
  const sampler = sampleUsedMemory(redis)
  const workers: WorkerProc[] = []
  let queue: JobQueue | undefined
  const records: CommandRecord[] = []
  let containersSeen: number
  let mem: { keys: number; bytes: number }
  let phase: { t0: number; t1: number }
  let effects = new Map<string, number>()
  let killInfo: RunReport['kill']
  let killState: { victim: WorkerProc; atCompleted: number; killAt: number } | undefined
  const accepted = new Set<string>()
  let usedPeak: number
  let usedAfter: number
  let leftContainers: number
  let leftKeys = 0
  try {
    const env = {
      REDIS_URL,
      SBX_SESSIONS: String(opts.sessions),
      SBX_CONCURRENCY: String(opts.workerConcurrency),
      SBX_KILL_DELAY_MS: String(opts.killDelayMs),
    }
    workers.push(
      ...(await Promise.all(
        Array.from({ length: opts.workers }, (_, i) => WorkerProc.start(names, `w${i + 1}`, env)),
      )),
    )
    queue = await createBullmqJobQueue({ redisUrl: REDIS_URL, prefix: names.queuePrefix, queueName: 'exec' })
    const profile = resolveProfile(LOAD_PROFILE, loadProfile(opts.sessions))
    const executor = new QueueRouteExecutor({
      queue: countingQueue(queue, accepted),
      targets: new ProfileCatalog(['docker'], [profile]),
      defaultTenant: TENANT,
      waitMarginMs: 20_000,
    })
    const route = (sessionId: string, command: string, callId: string): RouteRequest => ({
      providerId: 'docker',
      profile: LOAD_PROFILE,
      command,
      callId,
      toolName: 'bash',
      sessionId,
      tenant: TENANT,
      idempotent: opts.idempotent,
    })

    // Each session's commands run in order; `concurrency` runners take the next command of the next
    // idle session, round robin, so every session progresses and about `concurrency` jobs are in flight.
    const next = new Array<number>(opts.sessions).fill(0)
    const busy = new Array<boolean>(opts.sessions).fill(false)
    let cursor = 0
    let completed = 0
    let killing: Promise<void> | undefined
    const take = (): { session: number; index: number } | undefined => {
      for (let k = 0; k < opts.sessions; k++) {
        const s = (cursor + k) % opts.sessions
        if (!busy[s] && (next[s] ?? 0) < opts.commands) {
          cursor = (s + 1) % opts.sessions
          busy[s] = true
          const index = next[s] ?? 0
          next[s] = index + 1
          return { session: s, index }
        }
      }
      return undefined
    }
    const remaining = (): boolean => next.some((n, s) => n < opts.commands || busy[s])
    // Halfway, the worker with the most jobs running is SIGKILLed a few ms into the next job it starts
    // (it kills itself on cue, see load/worker.ts), so at least that job dies mid-command.
    const maybeKill = (): void => {
      if (!kill || killing || completed < Math.floor(total / 2)) return
      const atCompleted = completed
      const victim = [...workers].sort((x, y) => y.inFlight.size - x.inFlight.size)[0]
      if (!victim) return
      killing = victim.crashMidJob().then((killAt) => {
        killState = { victim, atCompleted, killAt }
      })
    }

    const runner = async (): Promise<void> => {
      for (;;) {
        if (abort.signal.aborted) return
        const item = take()
        if (!item) {
          if (!remaining()) return
          await new Promise((r) => setTimeout(r, 1))
          continue
        }
        const effect = `s${item.session}c${item.index}`
        const callId = `load-${names.scope}-${effect}`
        const request = route(`sess-${item.session}`, commandFor(effect), callId)
        const rec: CommandRecord = {
          session: item.session,
          index: item.index,
          effect,
          jobId: executor.jobIdOf(request),
          accepted: false,
          t0: performance.now(),
          t1: 0,
        }
        records.push(rec)
        try {
          const r = await executor.execute(request, {
            signal: abort.signal,
          })
          const m = /^ok (\S+) (\d+) [0-9a-f]{16}\n$/.exec(r.stdout)
          const countOk = kill || m?.[2] === String(item.index + 1)
          rec.status = r.exitCode === 0 && m?.[1] === effect && countOk ? 'completed' : 'bad-output'
          if (rec.status === 'bad-output') {
            console.error(`[${label}] ${effect}: exit ${r.exitCode} stdout ${JSON.stringify(r.stdout)}`)
          }
        } catch (err) {
          if (err instanceof JobInterruptedError) {
            rec.status = 'interrupted'
            if (err.previous?.workerId) rec.startedBy = err.previous.workerId
          } else if (err instanceof AppError && err.code === 'QUEUE_UNAVAILABLE') {
            rec.status = 'no-outcome'
            rec.code = err.code
          } else {
            rec.status = 'failed'
            rec.code = err instanceof AppError ? err.code : String(err)
            if (!abort.signal.aborted) console.error(`[${label}] ${effect}: ${String(err)}`)
          }
        } finally {
          rec.t1 = performance.now()
          rec.accepted = accepted.has(rec.jobId)
          busy[item.session] = false
        }
        if (rec.status === 'completed' || rec.status === 'bad-output') completed++
        maybeKill()
      }
    }

    phase = { t0: performance.now(), t1: 0 }
    await Promise.all(Array.from({ length: opts.concurrency }, () => runner()))
    phase.t1 = performance.now()
    await killing

    if (abort.signal.aborted) {
      const done = records.filter((r) => r.status === 'completed').length
      console.error(
        `\n[${label}] ABORTED: ${String(abort.signal.reason)} — ${done} of ${total} commands completed, ` +
          `${total - records.length} never submitted. Cleaning up.`,
      )
    } else {
      // The side-effect files: which ids each session's sandbox appended, and how often.
      effects = new Map()
      await Promise.all(
        Array.from({ length: opts.sessions }, async (_, s) => {
          const r = await executor.execute({
            ...route(`sess-${s}`, 'cat effects', `load-${names.scope}-check-${s}-${randomUUID()}`),
            idempotent: true,
          })
          for (const line of r.stdout.split('\n').filter(Boolean))
            effects.set(line, (effects.get(line) ?? 0) + 1)
        }),
      )
    }
    containersSeen = (await containersOf(docker, names)).length
    mem = await prefixMemory(redis, names)

    const k = killState
    if (process.env.BENCH_DEBUG) {
      const buckets = new Map<number, number>()
      for (const r of records) {
        const b = Math.floor((r.t1 - phase.t0) / 500)
        buckets.set(b, (buckets.get(b) ?? 0) + 1)
      }
      console.error(
        `[${label}] outcomes per 500 ms: ${[...buckets]
          .sort((x, y) => x[0] - y[0])
          .map(([b, n]) => `${b}:${n}`)
          .join(' ')}` + (k ? ` (kill at ${((k.killAt - phase.t0) / 500).toFixed(1)})` : ''),
      )
    }
    if (k && process.env.BENCH_DEBUG) {
      for (const w of workers)
        for (const l of w.lines)
          if (l.event === 'start' && (l.attempt ?? 1) > 1) {
            const r = records.find((x) => x.jobId === l.jobId)
            console.error(
              `[${label}] re-run ${l.jobId} attempt ${l.attempt} on ${w.workerId} at +${(l.at - k.killAt).toFixed(0)} ms; ` +
                `first started on the victim: ${k.victim.starts().has(l.jobId ?? '')}; outcome ${r?.status} at +${((r?.t1 ?? 0) - k.killAt).toFixed(0)} ms`,
            )
          }
    }
    if (k) {
      // The jobs the dead worker held: no outcome yet at the kill, and started there (its start lines),
      // or taken there before its processor announced them (re-run elsewhere, or fenced: interrupted).
      const started = k.victim.starts()
      const rerun = new Set(
        workers
          .filter((w) => w !== k.victim)
          .flatMap((w) =>
            w.lines.filter((l) => l.event === 'start' && (l.attempt ?? 1) > 1).map((l) => l.jobId),
          ),
      )
      const held = records.filter(
        (r) =>
          !(r.t1 > 0 && r.t1 <= k.killAt) &&
          (started.has(r.jobId) || rerun.has(r.jobId) || r.status === 'interrupted'),
      )
      const heldOutcomes: Record<string, number> = {}
      for (const r of held) heldOutcomes[r.status ?? 'none'] = (heldOutcomes[r.status ?? 'none'] ?? 0) + 1
      const after = held.map((r) => r.t1 - k.killAt)
      killInfo = {
        victim: k.victim.workerId,
        atCompleted: k.atCompleted,
        held: held.length,
        heldOutcomes,
        firstOutcomeMs: after.length > 0 ? Math.min(...after) : NaN,
        recoveryMs: after.length > 0 ? Math.max(...after) : NaN,
      }
    }
  } finally {
    clearTimeout(deadline)
    process.off('SIGINT', onSigint)
    await Promise.all(workers.map((w) => w.stop()))
    await queue?.close()
    // Clean up: the run's containers and Redis keys (also after a failure), then check nothing is left.
    const ids = await containersOf(docker, names)
    await Promise.all(
      ids.map((id) =>
        docker.destroy({ providerId: 'docker', id, profile: LOAD_PROFILE }).catch(() => undefined),
      ),
    )
    await deleteRunKeys(redis, names)
    usedPeak = await sampler.stop()
    usedAfter = await usedMemory(redis)
    leftContainers = (await containersOf(docker, names)).length
    for (const p of keyPatterns(names)) leftKeys += (await scanKeys(redis, p)).length
    console.log(
      `[${label}] cleanup: ${ids.length} containers destroyed, ${leftContainers} left; ${leftKeys} Redis keys left`,
    )
  }

  const byStatus: Record<Status, number> = {
    completed: 0,
    interrupted: 0,
    failed: 0,
    'bad-output': 0,
    'no-outcome': 0,
  }
  const failCodes: Record<string, number> = {}
  for (const r of records) {
    if (r.status) byStatus[r.status]++
    if (r.code) failCodes[r.code] = (failCodes[r.code] ?? 0) + 1
  }
  const done = records.filter((r) => r.status === 'completed')
  const lat = done.filter((r) => r.index > 0).map((r) => r.t1 - r.t0)
  const cold = done.filter((r) => r.index === 0).map((r) => r.t1 - r.t0)
  const allBound = Math.max(...records.filter((r) => r.index === 0).map((r) => r.t1))
  const steadyDone = done.filter((r) => r.t1 > allBound).length
  const submitted = new Set(records.map((r) => r.effect))
  let duplicates = 0
  let unknownEffects = 0
  for (const [id, n] of effects) {
    if (n > 1) duplicates += n - 1
    if (!submitted.has(id)) unknownEffects++
  }
  const aborted = phase.t1 === 0 || records.length < total || effects.size === 0
  // Lost: accepted with no outcome, or reported completed while its side effect is not in the file.
  const lost = aborted
    ? records.filter((r) => r.accepted && r.status === 'no-outcome').length
    : records.filter(
        (r) =>
          r.accepted && (r.status === 'no-outcome' || (r.status === 'completed' && !effects.has(r.effect))),
      ).length
  const interruptedRan = records.filter((r) => r.status === 'interrupted' && effects.has(r.effect)).length
  const interruptedByVictim = records.filter(
    (r) => r.status === 'interrupted' && killInfo && r.startedBy === killInfo.victim,
  ).length
  const redelivered = new Set(
    workers.flatMap((w) =>
      w.lines.filter((l) => l.event === 'start' && (l.attempt ?? 1) > 1).map((l) => l.jobId),
    ),
  ).size
  const pool = workers.reduce<PoolFigures>(
    (a, w) => ({
      acquires: a.acquires + w.pool.acquires,
      hits: a.hits + w.pool.hits,
      misses: a.misses + w.pool.misses,
      creates: a.creates + w.pool.creates,
    }),
    { acquires: 0, hits: 0, misses: 0, creates: 0 },
  )
  const end = phase.t1 || performance.now()
  const seconds = (end - phase.t0) / 1000
  return {
    label,
    aborted: abort.signal.aborted,
    total,
    accepted: records.filter((r) => r.accepted).length,
    byStatus,
    failCodes,
    seconds,
    throughput: done.length / seconds,
    steadyThroughput: end > allBound ? steadyDone / ((end - allBound) / 1000) : NaN,
    p50: percentile(lat, 50),
    p99: percentile(lat, 99),
    coldP50: percentile(cold, 50),
    coldP99: percentile(cold, 99),
    lost,
    duplicates,
    unknownEffects,
    interruptedRan,
    interruptedByVictim,
    redelivered,
    pool,
    containersSeen,
    redisKeys: mem.keys,
    redisBytes: mem.bytes,
    usedBefore,
    usedPeak,
    usedAfter,
    ...(killInfo ? { kill: killInfo } : {}),
    leftContainers,
    leftKeys,
  }
}

const mib = (b: number): string => `${(b / 1024 / 1024).toFixed(2)} MiB`
const kib = (b: number): string => `${(b / 1024).toFixed(0)} KiB`
const ms = (v: number): string => (Number.isFinite(v) ? `${v.toFixed(1)} ms` : '—')

function printTable(reports: RunReport[]): void {
  const killed = (f: (k: NonNullable<RunReport['kill']>) => string) => (r: RunReport) =>
    r.kill ? f(r.kill) : '—'
  const rows: [string, (r: RunReport) => string][] = [
    ['jobs accepted / planned', (r) => `${r.accepted} / ${r.total}`],
    ['completed', (r) => String(r.byStatus.completed)],
    ['errors (failed, bad output)', (r) => `${r.byStatus.failed + r.byStatus['bad-output']}${codes(r)}`],
    [
      'interrupted (fence); of them: command had run, fence names the killed worker',
      (r) => `${r.byStatus.interrupted}; ${r.interruptedRan}, ${r.interruptedByVictim}`,
    ],
    ['lost (no outcome, or completed without its side effect)', (r) => String(r.lost)],
    [
      'duplicates (an id twice in a side-effect file)',
      (r) => `${r.duplicates}${r.unknownEffects ? `, ${r.unknownEffects} unknown ids` : ''}`,
    ],
    ['re-run by a survivor (processor started, attempt > 1)', (r) => String(r.redelivered)],
    ['throughput, whole run', (r) => `${r.throughput.toFixed(0)} commands/s (${r.seconds.toFixed(2)} s)`],
    ['throughput once every session is bound', (r) => `${r.steadyThroughput.toFixed(0)} commands/s`],
    ['latency p50 / p99, warm commands', (r) => `${ms(r.p50)} / ${ms(r.p99)}`],
    ["latency p50 / p99, a session's first command (create)", (r) => `${ms(r.coldP50)} / ${ms(r.coldP99)}`],
    [
      'sandboxes created / reused (pool creates / hits of acquires)',
      (r) => `${r.pool.creates} / ${r.pool.hits} of ${r.pool.acquires}`,
    ],
    ["run's containers at the end", (r) => String(r.containersSeen)],
    [
      "Redis: the run's keys, MEMORY USAGE",
      (r) =>
        `${r.redisKeys} keys, ${kib(r.redisBytes)} (${(r.redisBytes / Math.max(1, r.accepted)).toFixed(0)} B/job)`,
    ],
    [
      'Redis used_memory before / peak (delta) / after cleanup',
      (r) =>
        `${mib(r.usedBefore)} / ${mib(r.usedPeak)} (+${mib(r.usedPeak - r.usedBefore)}) / ${mib(r.usedAfter)}`,
    ],
    ['SIGKILL', killed((k) => `worker ${k.victim}, at ${k.atCompleted} of the run's commands completed`)],
    [
      'jobs it held (started or taken there, no outcome yet) → outcome',
      killed(
        (k) =>
          `${k.held} → ` +
          (Object.entries(k.heldOutcomes)
            .map(([o, v]) => `${v} ${o}`)
            .join(', ') || 'none'),
      ),
    ],
    [
      'recovery: SIGKILL → first / last held job has its outcome',
      killed((k) => `${ms(k.firstOutcomeMs)} / ${ms(k.recoveryMs)}`),
    ],
    ['left after cleanup: containers / Redis keys', (r) => `${r.leftContainers} / ${r.leftKeys}`],
  ]
  console.log(`\n| | ${reports.map((r) => r.label).join(' | ')} |`)
  console.log(`|---|${reports.map(() => '---:').join('|')}|`)
  for (const [name, f] of rows) console.log(`| ${name} | ${reports.map(f).join(' | ')} |`)
}

function codes(r: RunReport): string {
  const e = Object.entries(r.failCodes)
  return e.length ? ` (${e.map(([k, v]) => `${k}×${v}`).join(', ')})` : ''
}

console.log(
  `load: ${opts.workers} worker processes × concurrency ${opts.workerConcurrency}, ${opts.sessions} sessions × ` +
    `${opts.commands} commands, producer concurrency ${opts.concurrency}, work ${opts.workMs} ms, ` +
    `${opts.idempotent ? 'idempotent' : 'non-idempotent'} routes${opts.kill ? ', run 2 SIGKILLs a worker halfway' : ''}`,
)
const docker = createDockerProvider()
const redis = new Redis(REDIS_URL)
const reports: RunReport[] = []
let failed = false
try {
  const r1 = await run('run 1 (no fault)', false, docker, redis)
  reports.push(r1)
  console.log(
    `run 1 ${r1.aborted ? 'aborted' : 'done'}: ${r1.byStatus.completed} completed in ${r1.seconds.toFixed(2)} s`,
  )
  if (opts.kill && !r1.aborted) {
    const r2 = await run('run 2 (one worker SIGKILLed halfway)', true, docker, redis)
    reports.push(r2)
    console.log(
      `run 2 ${r2.aborted ? 'aborted' : 'done'}: ${r2.byStatus.completed} completed in ${r2.seconds.toFixed(2)} s`,
    )
  }
} finally {
  printTable(reports)
  redis.disconnect()
  await docker.close()
}
for (const r of reports) {
  const errors = r.byStatus.failed + r.byStatus['bad-output'] + r.byStatus['no-outcome']
  const checks: [string, boolean][] = [
    [`${r.label}: not aborted`, !r.aborted],
    // Every command's job was seen accepted (else "lost" would be counted against nothing).
    [`${r.label}: accepted = planned`, r.aborted || r.accepted === r.total],
    [`${r.label}: lost = 0`, r.lost === 0],
    [`${r.label}: duplicates = 0`, opts.idempotent || r.duplicates === 0],
    [`${r.label}: 0 containers and 0 keys left`, r.leftContainers === 0 && r.leftKeys === 0],
  ]
  if (!r.kill)
    checks.push([`${r.label}: errors = 0, interrupted = 0`, errors === 0 && r.byStatus.interrupted === 0])
  for (const [what, ok] of checks) {
    console.log(`${ok ? 'PASS' : 'FAIL'}  ${what}`)
    if (!ok) failed = true
  }
}
process.exitCode = failed ? 1 : 0
