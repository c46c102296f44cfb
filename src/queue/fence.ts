import type { FenceRecord, JobResult, OutputChunk, QueueJob } from './schemas.js'
import type { FenceOutcome, JobFence } from './types.js'

/*
 * Fenced execution. Three records per job, each kept for the retention window:
 *   fence  — written atomically right before the command is handed to the sandbox (attempt, worker, time)
 *   done   — the job's result; the first writer wins, so a job completes exactly once
 *   cancel — a cancel request, for a worker that picks the job up after the request was broadcast
 * plus a bounded tail of the live output, so an interrupted job reports what it had printed.
 * The Redis store (redis-common/redis-fence.ts) runs the same decision in a Lua script.
 */

/** Every record the fence decision reads. */
export interface FenceSnapshot {
  readonly done?: JobResult
  readonly cancel?: string
  readonly fence?: FenceRecord
  readonly stdout: string
  readonly stderr: string
}

/**
 * The fence verdict: a stored result wins, then a cancel request, then an earlier start of a
 * non-idempotent job; otherwise the command may run (again, for idempotent jobs).
 */
export function decideFence(s: FenceSnapshot, idempotent: boolean): FenceOutcome<unknown> {
  if (s.done) return { kind: 'done', result: s.done }
  if (s.cancel !== undefined) return { kind: 'cancelled', reason: s.cancel }
  if (s.fence && !idempotent) return { kind: 'fenced', previous: s.fence, stdout: s.stdout, stderr: s.stderr }
  return s.fence ? { kind: 'run', previous: s.fence } : { kind: 'run' }
}

/** What is known about an interrupted job. */
export interface InterruptedInfo {
  readonly previous?: FenceRecord
  readonly stdout?: string
  readonly stderr?: string
  /** Why the job was given up, when the queue (not the fence) decided it. */
  readonly cause?: string
}

/** The result reported for a job whose earlier attempt may have run the command. */
export function interruptedResult(info: InterruptedInfo = {}): JobResult<never> {
  const { previous } = info
  const where = previous
    ? `attempt ${previous.attempt} on worker ${previous.workerId} started it at ` +
      `${new Date(previous.startedAt).toISOString()}` +
      (previous.sandboxId ? ` in sandbox ${previous.sandboxId}` : '') +
      ' and never reported back'
    : 'the worker running it stopped before reporting back'
  const cause = info.cause ? `The queue gave up on the job (${info.cause}). ` : ''
  return {
    status: 'interrupted',
    message:
      `${cause}The command may have run partly or fully: ${where}. It was not run again because the route is ` +
      'not marked idempotent; inspect the sandbox state before retrying, or mark the route idempotent.',
    ...(previous ? { previous } : {}),
    stdout: info.stdout ?? '',
    stderr: info.stderr ?? '',
  }
}

/** The outcome of a fence verdict that ends the job without running it, or undefined for `run`. */
export function resultOfOutcome<TValue>(outcome: FenceOutcome<TValue>): JobResult<TValue> | undefined {
  switch (outcome.kind) {
    case 'run':
      return undefined
    case 'done':
      return outcome.result
    case 'cancelled':
      return { status: 'cancelled', reason: outcome.reason }
    case 'fenced':
      return interruptedResult(outcome)
  }
}

interface MemoryRecords {
  done?: JobResult
  cancel?: string
  fence?: FenceRecord
  stdout: string
  stderr: string
  expiresAt: number
}

/** Options of {@link createMemoryFenceStore}. */
export interface MemoryFenceStoreOptions {
  /** How long records are kept (ms). */
  retentionMs: number
  /** Bytes of live output kept per stream for interrupted reports. */
  tailCapBytes: number
  now?: () => number
}

/** Fence records in this process (the in-process queue driver). */
export interface MemoryFenceStore {
  fence(job: QueueJob, attempt: number, workerId: string): JobFence<unknown>
  /** Records a cancel request (kept until the job has a result). */
  requestCancel(jobId: string, reason: string): void
  appendTail(jobId: string, chunk: OutputChunk): void
  result(jobId: string): JobResult | undefined
  /** Drops expired records. */
  sweep(): void
}

/** Creates the in-memory fence store. */
export function createMemoryFenceStore(options: MemoryFenceStoreOptions): MemoryFenceStore {
  const now = options.now ?? Date.now
  const records = new Map<string, MemoryRecords>()
  const get = (jobId: string): MemoryRecords => {
    let r = records.get(jobId)
    if (!r || r.expiresAt <= now()) {
      r = { stdout: '', stderr: '', expiresAt: 0 }
      records.set(jobId, r)
    }
    r.expiresAt = now() + options.retentionMs
    return r
  }
  const peek = (jobId: string): MemoryRecords | undefined => {
    const r = records.get(jobId)
    return r && r.expiresAt > now() ? r : undefined
  }
  return {
    fence(job, attempt, workerId) {
      return {
        inspect: () =>
          Promise.resolve(decideFence(peek(job.jobId) ?? { stdout: '', stderr: '' }, job.idempotent)),
        begin(start) {
          const r = get(job.jobId)
          const outcome = decideFence(r, job.idempotent)
          if (outcome.kind === 'run') {
            r.fence = {
              attempt,
              workerId,
              startedAt: now(),
              ...(start.sandboxId ? { sandboxId: start.sandboxId } : {}),
            }
            r.stdout = ''
            r.stderr = ''
          }
          return Promise.resolve(outcome)
        },
        finish(result) {
          const r = get(job.jobId)
          r.done ??= result
          return Promise.resolve(r.done)
        },
      }
    },
    requestCancel(jobId, reason) {
      const r = get(jobId)
      if (!r.done) r.cancel ??= reason
    },
    appendTail(jobId, chunk) {
      const r = peek(jobId)
      if (!r) return
      const current = chunk.stream === 'stdout' ? r.stdout : r.stderr
      if (current.length >= options.tailCapBytes) return
      const next = current + chunk.data.slice(0, options.tailCapBytes - current.length)
      if (chunk.stream === 'stdout') r.stdout = next
      else r.stderr = next
    },
    result: (jobId) => peek(jobId)?.done,
    sweep() {
      const t = now()
      for (const [id, r] of records) if (r.expiresAt <= t) records.delete(id)
    },
  }
}
