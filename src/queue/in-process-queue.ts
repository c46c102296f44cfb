import { AppError } from '../errors.js'
import { createMemoryFenceStore } from './fence.js'
import { OUTPUT_LOG_CAP_BYTES, OUTPUT_LOG_LINGER_MS, OutputLog } from './output-log.js'
import { checkConcurrency, defaultWorkerId, failedResult, runJob } from './run-job.js'
import type { AnyJobProcessor, RunOutcome } from './run-job.js'
import type { ExecJob, ExecResult, JobResult, LoggedChunk, OutputChunk, QueueJob } from './schemas.js'
import { anyKind, EXEC_JOBS } from './job-kind.js'
import type { Consumer, ConsumeOptions, JobAbortReason, JobInfo, JobKind, JobQueue } from './types.js'
import { boundedWait } from './wait-for.js'
import { writeAlongside } from './submit-or-get.js'

/** Options of {@link createInProcessJobQueue}. */
export interface InProcessQueueOptions {
  /** How long finished jobs (and their results) are kept for resubmissions (ms). @default 3600000 */
  retentionMs?: number
  /** Live output kept per stream for interrupted reports (bytes). @default 65536 */
  tailCapBytes?: number
  /** Live output retained per job for resuming readers (bytes). @default 1048576 */
  outputLogCapBytes?: number
  /** After aborting jobs at shutdown, wait this long for processors to settle (ms). @default 5000 */
  abortGraceMs?: number
}

/** Options of {@link createInProcessJobQueue} for a queue of another job kind than exec jobs. */
export interface InProcessKindOptions<TJob extends QueueJob, TValue> extends InProcessQueueOptions {
  /** What the queue carries. @default EXEC_JOBS */
  kind: JobKind<TJob, TValue>
}

interface Entry {
  readonly job: QueueJob
  state: 'waiting' | 'active' | 'done'
  attempt: number
  result?: JobResult
  doneAt?: number
  controller?: AbortController
  /** Numbered live output for resuming readers; dropped a minute after the job finished. */
  log?: OutputLog
  readonly waiters: Set<(r: JobResult) => void>
}

interface LocalConsumer {
  readonly workerId: string
  readonly concurrency: number
  readonly processor: AnyJobProcessor
  readonly onSkipped?: ((job: QueueJob, result: JobResult) => Promise<void>) | undefined
  readonly onError: (err: unknown, context: string) => void
  readonly active: Set<Entry>
  closing: boolean
  onIdle?: () => void
}

function infoOf(e: Entry): JobInfo<QueueJob, unknown> {
  const state = e.state === 'done' ? 'finished' : e.state
  return { job: e.job, state, ...(e.result ? { result: e.result } : {}) }
}

/** A listener's exception must not reach the sandbox's output callback. */
function deliverSafely(listener: (chunk: LoggedChunk) => void, chunk: LoggedChunk): void {
  try {
    listener(chunk)
  } catch {
    // The listener's problem; the job goes on and its result carries the whole output.
  }
}

/**
 * The embedded single-process queue: no Redis, same semantics as the BullMQ driver (job ids, retention,
 * fencing, cancellation, hand-back on shutdown). Jobs live only as long as the process.
 */
export function createInProcessJobQueue(options?: InProcessQueueOptions): JobQueue
export function createInProcessJobQueue<TJob extends QueueJob, TValue>(
  options: InProcessKindOptions<TJob, TValue>,
): JobQueue<TJob, TValue>
export function createInProcessJobQueue(
  options: InProcessQueueOptions & { kind?: JobKind<QueueJob, unknown> } = {},
): JobQueue<QueueJob, unknown> {
  const kind = options.kind ?? anyKind<ExecJob, ExecResult>(EXEC_JOBS)
  const retentionMs = options.retentionMs ?? 3_600_000
  const abortGraceMs = options.abortGraceMs ?? 5_000
  const fences = createMemoryFenceStore({ retentionMs, tailCapBytes: options.tailCapBytes ?? 65_536 })
  const entries = new Map<string, Entry>()
  const waiting: Entry[] = []
  const listeners = new Map<string, Set<(chunk: LoggedChunk) => void>>()
  const logCapBytes = options.outputLogCapBytes ?? OUTPUT_LOG_CAP_BYTES
  const consumers = new Set<LocalConsumer>()
  const failClosed = new Set<(err: unknown) => void>()
  let closed = false
  let lastSweep = Date.now()

  const sweep = (): void => {
    const now = Date.now()
    if (now - lastSweep < 10_000) return
    lastSweep = now
    for (const [id, e] of entries)
      if (e.state === 'done' && (e.doneAt ?? 0) + retentionMs <= now) entries.delete(id)
    fences.sweep()
  }

  const complete = (entry: Entry, result: JobResult): void => {
    if (entry.state === 'done') return
    const i = waiting.indexOf(entry)
    if (i >= 0) waiting.splice(i, 1)
    entry.state = 'done'
    entry.result = result
    entry.doneAt = Date.now()
    if (entry.log) {
      const log = entry.log
      setTimeout(() => {
        if (entry.log === log) delete entry.log
      }, OUTPUT_LOG_LINGER_MS).unref()
    }
    for (const w of entry.waiters) w(result)
    entry.waiters.clear()
  }

  const settle = (c: LocalConsumer, entry: Entry, attempt: number, outcome: RunOutcome): void => {
    if (c.active.delete(entry) && c.active.size === 0) c.onIdle?.()
    if (outcome.kind === 'result') complete(entry, outcome.result)
    else if (entry.state === 'active' && entry.attempt === attempt) {
      entry.state = 'waiting'
      waiting.unshift(entry)
    }
    dispatch()
  }

  const start = (c: LocalConsumer, entry: Entry): void => {
    entry.state = 'active'
    entry.attempt += 1
    const attempt = entry.attempt
    const controller = new AbortController()
    entry.controller = controller
    c.active.add(entry)
    const { jobId } = entry.job
    const ctx = {
      signal: controller.signal,
      attempt,
      workerId: c.workerId,
      fence: fences.fence(entry.job, attempt, c.workerId),
      publish(chunk: OutputChunk) {
        fences.appendTail(jobId, chunk)
        const logged = (entry.log ??= new OutputLog(logCapBytes)).append(chunk)
        const ls = listeners.get(jobId)
        if (ls) for (const l of ls) deliverSafely(l, logged)
      },
    }
    const onSkipped = c.onSkipped
    const skipped = onSkipped
      ? (job: QueueJob, result: JobResult): Promise<void> =>
          onSkipped(job, result).catch((err: unknown) => c.onError(err, `job ${job.jobId}`))
      : undefined
    runJob(c.processor, entry.job, ctx, skipped).then(
      (outcome) => settle(c, entry, attempt, outcome),
      (err: unknown) => settle(c, entry, attempt, { kind: 'result', result: failedResult(err) }),
    )
  }

  const dispatch = (): void => {
    for (const c of consumers) {
      while (!c.closing && c.active.size < c.concurrency && waiting.length > 0) {
        const entry = waiting.shift()
        if (entry) start(c, entry)
      }
    }
  }

  const closeConsumer = async (c: LocalConsumer, deadlineMs: number): Promise<void> => {
    c.closing = true
    const idle = (): Promise<void> =>
      c.active.size === 0 ? Promise.resolve() : new Promise<void>((resolve) => (c.onIdle = resolve))
    const within = (ms: number): Promise<void> =>
      new Promise<void>((resolve) => {
        const t = setTimeout(resolve, ms)
        void idle().then(() => {
          clearTimeout(t)
          resolve()
        })
      })
    await within(deadlineMs)
    const reason: JobAbortReason = { kind: 'shutdown' }
    for (const e of c.active) e.controller?.abort(reason)
    await within(abortGraceMs)
    // Processors that ignored the abort: hand their jobs back anyway; fencing covers a late finish.
    for (const e of [...c.active]) settle(c, e, e.attempt, { kind: 'handback' })
    consumers.delete(c)
    dispatch()
  }

  /** Adds the job unless its id exists (then `existing` is its entry). */
  const added = (input: QueueJob): Promise<{ job: QueueJob; existing?: Entry }> => {
    if (closed) return Promise.reject(new AppError('QUEUE_UNAVAILABLE', 'The job queue is closed.'))
    const job = kind.payload.parse(input)
    sweep()
    const existing = entries.get(job.jobId)
    if (existing) return Promise.resolve({ job, existing })
    const entry: Entry = { job, state: 'waiting', attempt: 0, waiters: new Set() }
    entries.set(job.jobId, entry)
    waiting.push(entry)
    dispatch()
    return Promise.resolve({ job })
  }

  return {
    driver: 'in-process',

    submit(input) {
      return added(input).then(({ job }) => ({ jobId: job.jobId }))
    },

    async submitOrGet(input, opts = {}) {
      const { existing } = await added(input)
      // No Redis here: the record is written by itself.
      await writeAlongside(opts.alongside)
      return existing ? { kind: 'exists', info: infoOf(existing) } : { kind: 'added' }
    },

    wait(jobId, opts) {
      const entry = entries.get(jobId)
      if (!entry) {
        const err = new AppError(
          'NOT_FOUND',
          `No job ${jobId} in the queue: never submitted, past retention, or lost with a restart of this process.`,
        )
        return Promise.reject(err)
      }
      return boundedWait<JobResult>(jobId, opts, (resolve, reject) => {
        if (entry.result) {
          resolve(entry.result)
          return () => {}
        }
        entry.waiters.add(resolve)
        failClosed.add(reject)
        return () => {
          entry.waiters.delete(resolve)
          failClosed.delete(reject)
        }
      })
    },

    getResult: (jobId) => Promise.resolve(entries.get(jobId)?.result ?? fences.result(jobId)),

    inspect(jobId) {
      const e = entries.get(jobId)
      return Promise.resolve(e ? infoOf(e) : undefined)
    },

    list(tenant, opts) {
      sweep()
      const found: JobInfo<QueueJob, unknown>[] = []
      // Map order is insertion (submission) order: walk it backwards for newest first.
      for (const e of [...entries.values()].reverse()) {
        if (found.length >= opts.limit) break
        if (e.job.tenant !== tenant) continue
        if (opts.sessionId !== undefined && e.job.sessionId !== opts.sessionId) continue
        found.push(infoOf(e))
      }
      return Promise.resolve(found)
    },

    counts() {
      let active = 0
      for (const c of consumers) active += c.active.size
      return Promise.resolve({ waiting: waiting.length, active })
    },

    subscribeOutput(jobId, listener) {
      let set = listeners.get(jobId)
      if (!set) listeners.set(jobId, (set = new Set()))
      set.add(listener)
      return Promise.resolve(() => {
        set.delete(listener)
        if (set.size === 0 && listeners.get(jobId) === set) listeners.delete(jobId)
        return Promise.resolve()
      })
    },

    readOutput(jobId) {
      return Promise.resolve(entries.get(jobId)?.log?.retained() ?? [])
    },

    async cancel(jobId, reason = 'cancelled by the caller') {
      const entry = entries.get(jobId)
      if (!entry || entry.state === 'done') return
      fences.requestCancel(jobId, reason)
      if (entry.state === 'waiting') {
        // Out of the waiting list first, so no consumer starts it while the result is stored.
        const i = waiting.indexOf(entry)
        if (i >= 0) waiting.splice(i, 1)
        const fence = fences.fence(entry.job, entry.attempt, 'queue')
        complete(entry, await fence.finish({ status: 'cancelled', reason }))
        return
      }
      const abort: JobAbortReason = { kind: 'cancelled', reason }
      entry.controller?.abort(abort)
    },

    consume(processor, opts: ConsumeOptions<QueueJob, unknown> = {}) {
      if (closed) return Promise.reject(new AppError('QUEUE_UNAVAILABLE', 'The job queue is closed.'))
      const c: LocalConsumer = {
        workerId: opts.workerId ?? defaultWorkerId(),
        concurrency: checkConcurrency(opts.concurrency, 8),
        processor,
        onSkipped: opts.onSkipped,
        onError: opts.onError ?? ((): void => undefined),
        active: new Set(),
        closing: false,
      }
      consumers.add(c)
      dispatch()
      const consumer: Consumer = {
        workerId: c.workerId,
        get activeCount() {
          return c.active.size
        },
        close: ({ deadlineMs = 30_000 } = {}) => closeConsumer(c, deadlineMs),
      }
      return Promise.resolve(consumer)
    },

    async close() {
      if (closed) return
      closed = true
      await Promise.all([...consumers].map((c) => closeConsumer(c, 0)))
      const err = new AppError('QUEUE_UNAVAILABLE', 'The job queue closed before the job finished.')
      for (const reject of failClosed) reject(err)
      failClosed.clear()
      listeners.clear()
    },
  }
}
