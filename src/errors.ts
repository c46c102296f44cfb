/**
 * Stable error codes. Each maps to one HTTP status in the service surface and is safe to show to
 * callers (messages never carry secrets).
 */
export type ErrorCode =
  | 'BAD_REQUEST'
  | 'CONFIG_INVALID'
  | 'UNAUTHORIZED'
  | 'FORBIDDEN'
  | 'NOT_FOUND'
  | 'CONFLICT'
  | 'PAYLOAD_TOO_LARGE'
  | 'RATE_LIMITED'
  | 'UNAVAILABLE'
  | 'EXTENSION_ERROR'
  | 'INTERCEPTOR_FAILED'
  | 'UNKNOWN_PROVIDER'
  | 'UNKNOWN_PROFILE'
  | 'SANDBOX_LOST'
  | 'SANDBOX_CREATE_FAILED'
  | 'SANDBOX_TIMEOUT'
  | 'ACQUIRE_TIMEOUT'
  | 'QUOTA_EXCEEDED'
  | 'NO_SPACE'
  | 'JOB_INTERRUPTED'
  | 'JOB_CANCELLED'
  | 'QUEUE_UNAVAILABLE'
  | 'UNSUPPORTED'
  | 'INTERNAL'

/** Options accepted by {@link AppError}. */
export interface AppErrorOptions {
  /** Whether retrying the same operation later may succeed. @default false */
  retryable?: boolean
  cause?: unknown
}

/**
 * The one base class of the project's errors: a stable `code`, a message that says how to fix the
 * problem, a `retryable` flag and the original error as `cause`.
 */
export class AppError extends Error {
  override readonly name: string = 'AppError'
  readonly retryable: boolean
  constructor(
    readonly code: ErrorCode,
    message: string,
    opts: AppErrorOptions = {},
  ) {
    super(message, { cause: opts.cause })
    this.retryable = opts.retryable ?? false
  }
}

/** Exhaustiveness helper for `switch` statements over discriminated unions. */
export function assertNever(value: never): never {
  throw new Error(`unexpected value: ${JSON.stringify(value)}`)
}
