import { hostname } from 'node:os'
import { randomBytes } from 'node:crypto'
import { AppError } from '../errors.js'
import { resultOfOutcome } from './fence.js'
import type { JobResult, QueueJob } from './schemas.js'
import type { JobAbortReason, JobContext, JobProcessor } from './types.js'

/** A processor as the drivers hold it: the job kind's payload is parsed before it is called. */
export type AnyJobProcessor = JobProcessor<QueueJob, unknown>

/** How a driver must settle a job after running its processor. */
export type RunOutcome =
  | { readonly kind: 'result'; readonly result: JobResult }
  /** Aborted for shutdown: put the job back on the queue for another consumer. */
  | { readonly kind: 'handback' }

/**
 * The driver-independent part of running a job: on a redelivery the fence is consulted first (a
 * stored result, a cancel request or an earlier non-idempotent start ends the job without calling the
 * processor); processor errors become results; the result is stored through the fence, so a job that
 * two attempts finish still completes exactly once.
 */
export async function runJob(
  processor: AnyJobProcessor,
  job: QueueJob,
  ctx: JobContext<unknown>,
  onSkipped?: (job: QueueJob, result: JobResult) => Promise<void>,
): Promise<RunOutcome> {
  if (ctx.attempt > 1) {
    const early = resultOfOutcome(await ctx.fence.inspect())
    if (early) {
      const result = await ctx.fence.finish(early)
      await onSkipped?.(job, result)
      return { kind: 'result', result }
    }
  }
  let result: JobResult
  try {
    result = await processor(job, ctx)
  } catch (err) {
    const abort = abortReasonOf(ctx.signal)
    if (abort?.kind === 'shutdown') return { kind: 'handback' }
    result = abort?.kind === 'cancelled' ? { status: 'cancelled', reason: abort.reason } : failedResult(err)
  }
  return { kind: 'result', result: await ctx.fence.finish(result) }
}

/** The {@link JobAbortReason} of an aborted job signal, if it carries one. */
export function abortReasonOf(signal: AbortSignal): JobAbortReason | undefined {
  if (!signal.aborted) return undefined
  const r: unknown = signal.reason
  if (typeof r === 'object' && r !== null && 'kind' in r) {
    const kind = (r as { kind: unknown }).kind
    if (kind === 'shutdown') return { kind: 'shutdown' }
    if (kind === 'cancelled')
      return { kind: 'cancelled', reason: String((r as { reason?: unknown }).reason ?? 'cancelled') }
  }
  return { kind: 'cancelled', reason: r instanceof Error ? r.message : String(r) }
}

/** A `failed` job result for an error thrown while processing. */
export function failedResult(err: unknown): JobResult<never> {
  if (err instanceof AppError)
    return { status: 'failed', code: err.code, message: err.message, retryable: err.retryable }
  const message = err instanceof Error ? err.message : String(err)
  return {
    status: 'failed',
    code: 'INTERNAL',
    message: `The worker failed to run the job: ${message}`,
    retryable: false,
  }
}

/** A default consumer id: `<hostname>-<pid>-<random>`. */
export function defaultWorkerId(): string {
  return `${hostname()}-${process.pid}-${randomBytes(3).toString('hex')}`
}

/** Validates a consumer concurrency option. */
export function checkConcurrency(n: number | undefined, fallback: number): number {
  const c = n ?? fallback
  if (!Number.isInteger(c) || c < 1) {
    throw new AppError('CONFIG_INVALID', `Worker concurrency must be a positive integer, got ${c}.`)
  }
  return c
}
