import { AppError } from '../errors.js'
import type { ExecJobResult, FenceRecord } from '../queue/schemas.js'
import type { ExecResult } from '../sandbox/types.js'

const TAIL_IN_MESSAGE = 2_000

/** A routed command whose worker died mid-run; it was not run again. Carries what is known. */
export class JobInterruptedError extends AppError {
  override readonly name = 'JobInterruptedError'
  constructor(
    message: string,
    /** The attempt that started the command, when known. */
    readonly previous: FenceRecord | undefined,
    /** Output published before the interruption (a bounded tail). */
    readonly partial: { readonly stdout: string; readonly stderr: string },
  ) {
    super('JOB_INTERRUPTED', message + partialText(partial), { retryable: false })
  }
}

function partialText(p: { stdout: string; stderr: string }): string {
  if (!p.stdout && !p.stderr) return ' No output was seen before the interruption.'
  const cut = (s: string): string =>
    (s.length > TAIL_IN_MESSAGE ? `…${s.slice(-TAIL_IN_MESSAGE)}` : s) || '(empty)'
  return `\nOutput before the interruption:\nstdout:\n${cut(p.stdout)}\nstderr:\n${cut(p.stderr)}`
}

/** A routed command the queue did not accept (Redis unreachable): nothing ran; submit it again later. */
export class JobNotAcceptedError extends AppError {
  override readonly name = 'JobNotAcceptedError'
  constructor(
    readonly jobId: string,
    cause: AppError,
  ) {
    super(cause.code, cause.message, { retryable: cause.retryable, cause })
  }
}

/**
 * A routed command accepted as a job whose result could not be read before the caller's deadline
 * (Redis away, or no worker). It was asked to stop, but it may have run: the job's view tells.
 */
export class JobOutcomeUnknownError extends AppError {
  override readonly name = 'JobOutcomeUnknownError'
  constructor(
    readonly jobId: string,
    cause: AppError,
  ) {
    super(
      cause.code,
      `Accepted as job ${jobId}; its result could not be read (${cause.message}). It was asked to stop so ` +
        `it does not run later, but it may have run partly or fully: GET /v1/jobs/${jobId} for its final state.`,
      { retryable: cause.retryable, cause },
    )
  }
}

/** The error of a cancelled routed command. */
export function jobCancelledError(reason: string): AppError {
  return new AppError(
    'JOB_CANCELLED',
    `The command was cancelled (${reason}); its process group in the sandbox was killed.`,
  )
}

/** The ExecResult of a completed job, or the AppError its other outcomes stand for. */
export function unwrapJobResult(r: ExecJobResult): ExecResult {
  switch (r.status) {
    case 'completed':
      return r.result
    case 'interrupted':
      throw new JobInterruptedError(r.message, r.previous, { stdout: r.stdout, stderr: r.stderr })
    case 'cancelled':
      throw jobCancelledError(r.reason)
    case 'failed':
      throw new AppError(r.code, r.message, { retryable: r.retryable })
  }
}
