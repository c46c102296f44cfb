import { performance } from 'node:perf_hooks'
import type { ExecJob, ExecJobResult } from '../queue/schemas.js'
import type { JobProcessor, JobQueue } from '../queue/types.js'
import type { SessionPool } from '../sessions/types.js'
import { createExecProcessor } from './exec-processor.js'
import type { WorkerErrorHandler } from './exec-processor.js'

/** Options of {@link startExecWorker}. */
export interface ExecWorkerOptions {
  /** The queue to take exec jobs from (BullMQ for a fleet, in-process when embedded). */
  queue: JobQueue
  /** Sandboxes for the jobs; owned by the caller (not shut down by `close`). */
  pool: SessionPool
  /** Jobs run at once by this worker. @default 16 */
  concurrency?: number
  /** Id recorded in fence records and results. @default `<hostname>-<pid>-<random>` */
  workerId?: string
  /** Give up acquiring a sandbox after this long (ms). @default the pool's default */
  acquireTimeoutMs?: number
  /** Errors that do not change a job's result. @default ignore */
  onError?: WorkerErrorHandler
  /** Observes jobs on this worker (logs, metrics). Must not throw. */
  onJob?: (event: ExecWorkerEvent) => void
}

/** A job starting or ending on a worker. `end` carries the processor's result, or its error. */
export type ExecWorkerEvent =
  | { readonly type: 'start'; readonly job: ExecJob; readonly attempt: number; readonly workerId: string }
  | {
      readonly type: 'end'
      readonly job: ExecJob
      readonly attempt: number
      readonly workerId: string
      readonly durationMs: number
      readonly result?: ExecJobResult
      readonly error?: unknown
    }

/** A running exec worker. */
export interface ExecWorkerHandle {
  readonly workerId: string
  /** Jobs running now. */
  readonly activeCount: number
  /**
   * Graceful shutdown: stops taking jobs, lets running ones finish for up to `deadlineMs`
   * (default 30000), then kills the rest and hands them back to the queue — another worker reports
   * them `interrupted`, or re-runs them when their route is idempotent.
   */
  close(opts?: { deadlineMs?: number }): Promise<void>
}

/** Starts consuming exec jobs: what `sbx worker` (and the embedded server) run. */
export async function startExecWorker(options: ExecWorkerOptions): Promise<ExecWorkerHandle> {
  const inner = createExecProcessor({
    pool: options.pool,
    ...(options.acquireTimeoutMs === undefined ? {} : { acquireTimeoutMs: options.acquireTimeoutMs }),
    ...(options.onError ? { onError: options.onError } : {}),
  })
  const { onJob } = options
  const processor: JobProcessor = !onJob
    ? inner
    : async (job, ctx) => {
        const base = { job, attempt: ctx.attempt, workerId: ctx.workerId }
        onJob({ type: 'start', ...base })
        const t0 = performance.now()
        try {
          const result = await inner(job, ctx)
          onJob({ type: 'end', ...base, durationMs: performance.now() - t0, result })
          return result
        } catch (error) {
          onJob({ type: 'end', ...base, durationMs: performance.now() - t0, error })
          throw error
        }
      }
  const consumer = await options.queue.consume(processor, {
    concurrency: options.concurrency ?? 16,
    ...(options.workerId ? { workerId: options.workerId } : {}),
    ...(options.onError ? { onError: options.onError } : {}),
  })
  return {
    workerId: consumer.workerId,
    get activeCount() {
      return consumer.activeCount
    },
    close: async (opts) => {
      await consumer.close(opts)
      await inner.idle()
    },
  }
}
