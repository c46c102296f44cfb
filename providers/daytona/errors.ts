import {
  DaytonaAuthenticationError,
  DaytonaBadGatewayError,
  DaytonaBadRequestError,
  DaytonaConflictError,
  DaytonaConnectionError,
  DaytonaConnectionTimeoutError,
  DaytonaError,
  DaytonaFileAccessDeniedError,
  DaytonaForbiddenError,
  DaytonaGoneError,
  DaytonaInternalServerError,
  DaytonaNotFoundError,
  DaytonaRateLimitError,
  DaytonaServiceUnavailableError,
  DaytonaTimeoutError,
} from '@daytonaio/sdk'
import { AppError, type ErrorCode, scrubSecret, secretSafeCause } from '../../src/sandbox/index.js'
import { API_KEY_ENV } from './options.js'

/** What the error mapper needs to word messages without leaking secrets. */
export interface ErrorScope {
  /** The control-plane URL with credentials, query and fragment removed. */
  apiUrl: string
  /** Scrubbed from every message that crosses the provider edge. */
  apiKey: string
}

/** `url` without user info, query or fragment (for messages). */
export function redactUrl(url: string): string {
  try {
    const u = new URL(url)
    return `${u.protocol}//${u.host}${u.pathname.replace(/\/$/, '')}`
  } catch {
    return '(invalid URL)'
  }
}

/** Seconds from a `Retry-After[-throttler]` or `X-RateLimit-Reset[-throttler]` header of a 429. */
export function retryAfterSeconds(err: unknown): number | undefined {
  if (!(err instanceof DaytonaError) || !err.headers) return undefined
  const raw = err.headers as unknown
  const headers: Record<string, unknown> =
    typeof (raw as { toJSON?: unknown }).toJSON === 'function'
      ? ((raw as { toJSON: () => Record<string, unknown> }).toJSON() ?? {})
      : (raw as Record<string, unknown>)
  let best: number | undefined
  for (const [name, value] of Object.entries(headers)) {
    if (!/^(retry-after|x-ratelimit-reset)/i.test(name)) continue
    const seconds = Number(Array.isArray(value) ? value[0] : value)
    if (Number.isFinite(seconds) && seconds >= 0) best = Math.max(best ?? 0, seconds)
  }
  return best
}

function detail(err: unknown, secret: string): string {
  const message = err instanceof Error ? err.message : String(err)
  return scrubSecret(message, secret).slice(0, 500)
}

function make(
  code: ErrorCode,
  message: string,
  err: unknown,
  scope: ErrorScope,
  retryable = false,
): AppError {
  return new AppError(code, scrubSecret(message, scope.apiKey), {
    retryable,
    cause: secretSafeCause(err, scope.apiKey),
  })
}

/** Whether the error says the sandbox (not a file in it) is gone: HTTP 404/410 without a file code. */
export function isSandboxGone(err: unknown): boolean {
  if (!(err instanceof DaytonaNotFoundError) && !(err instanceof DaytonaGoneError)) return false
  return !err.code || !/^FILE_|^PROCESS_|^SESSION_|^COMMAND_/.test(err.code)
}

/**
 * Whether the daemon refused a file for the sandbox user's permissions: `FILE_ACCESS_DENIED`, which
 * the SDK raises as `DaytonaFileAccessDeniedError` when the daemon names itself (`source`) and as a
 * plain 403 (`DaytonaAuthorizationError`) from daemons that do not (v0.190.0). Never a credential problem.
 */
export function isFileAccessDenied(err: unknown): boolean {
  return (
    err instanceof DaytonaFileAccessDeniedError ||
    (err instanceof DaytonaError && err.code === 'FILE_ACCESS_DENIED')
  )
}

/**
 * Whether a toolbox failure is worth a state check (the sandbox may have stopped or gone, and the
 * proxy's status for that is not a contract): any HTTP or connection failure that is not about
 * credentials, rate limits or one file.
 */
export function mayBeLost(err: unknown): boolean {
  if (!(err instanceof DaytonaError)) return false
  if (
    err instanceof DaytonaRateLimitError ||
    err instanceof DaytonaAuthenticationError ||
    err instanceof DaytonaForbiddenError
  ) {
    return false
  }
  if (err.code && /^(FILE_|INVALID_FILE_PATH$)/.test(err.code)) return false
  return err.statusCode !== undefined || err instanceof DaytonaConnectionError
}

/**
 * Translates an SDK error at the provider edge, by error class (HTTP status), never by message
 * text. `what` names the operation; `sandboxId` makes a 404 mean `SANDBOX_LOST`.
 */
export function mapDaytonaError(err: unknown, scope: ErrorScope, what: string, sandboxId?: string): AppError {
  if (err instanceof AppError) return err
  const why = detail(err, scope.apiKey)
  if (isFileAccessDenied(err)) {
    return make(
      'BAD_REQUEST',
      `${what}: permission denied in the sandbox (${why}); use a path the sandbox user may access`,
      err,
      scope,
    )
  }
  if (err instanceof DaytonaAuthenticationError || err instanceof DaytonaForbiddenError) {
    return make(
      'CONFIG_INVALID',
      `${what}: Daytona at ${scope.apiUrl} rejected the API key (HTTP ${err.statusCode ?? 401}); ` +
        `set ${API_KEY_ENV} to a valid key of the organisation (and check apiUrl)`,
      err,
      scope,
    )
  }
  if (err instanceof DaytonaRateLimitError) {
    const after = retryAfterSeconds(err)
    return make(
      'RATE_LIMITED',
      `${what}: Daytona rate limit reached (HTTP 429)` +
        (after !== undefined ? `; retry after ${after} s` : '; retry later') +
        ' or lower the request rate',
      err,
      scope,
      true,
    )
  }
  if (sandboxId && isSandboxGone(err)) {
    return make(
      'SANDBOX_LOST',
      `sandbox ${sandboxId} no longer exists on Daytona (deleted, or auto-deleted after auto-stop); create a new sandbox`,
      err,
      scope,
    )
  }
  if (err instanceof DaytonaConnectionTimeoutError || err instanceof DaytonaTimeoutError) {
    return make(
      'SANDBOX_TIMEOUT',
      `${what}: no answer from Daytona in time (${why}); retry, or raise requestTimeoutMs`,
      err,
      scope,
      true,
    )
  }
  if (err instanceof DaytonaConnectionError) {
    return make(
      'UNAVAILABLE',
      `${what}: cannot reach the Daytona API at ${scope.apiUrl} (${why}); check apiUrl and the network, then retry`,
      err,
      scope,
      true,
    )
  }
  if (
    err instanceof DaytonaInternalServerError ||
    err instanceof DaytonaBadGatewayError ||
    err instanceof DaytonaServiceUnavailableError
  ) {
    return make(
      'UNAVAILABLE',
      `${what}: Daytona failed (HTTP ${err.statusCode}: ${why}); retry later`,
      err,
      scope,
      true,
    )
  }
  if (err instanceof DaytonaBadRequestError) {
    return make('BAD_REQUEST', `${what}: Daytona refused the request (${why})`, err, scope)
  }
  if (err instanceof DaytonaNotFoundError) {
    return make('NOT_FOUND', `${what}: not found on Daytona (${why})`, err, scope)
  }
  if (err instanceof DaytonaConflictError) {
    return make('CONFLICT', `${what}: conflicting state on Daytona (${why}); retry`, err, scope, true)
  }
  const status = err instanceof DaytonaError ? err.statusCode : undefined
  return make('INTERNAL', `${what} failed: ${why}`, err, scope, status === undefined || status >= 500)
}

/** A create failure: credentials stay `CONFIG_INVALID`; anything else is `SANDBOX_CREATE_FAILED`. */
export function mapCreateError(err: unknown, scope: ErrorScope, what: string): AppError {
  const mapped = mapDaytonaError(err, scope, what)
  if (mapped.code === 'CONFIG_INVALID' || mapped.code === 'SANDBOX_CREATE_FAILED') return mapped
  if (err instanceof DaytonaRateLimitError) {
    const after = retryAfterSeconds(err)
    return new AppError(
      'SANDBOX_CREATE_FAILED',
      `${what}: Daytona refused the create with HTTP 429 (rate limit or concurrent-sandbox quota)` +
        (after !== undefined ? `; retry after ${after} s` : '; retry later') +
        ', lower the create rate or destroy idle sandboxes',
      { retryable: true, cause: mapped.cause },
    )
  }
  return new AppError('SANDBOX_CREATE_FAILED', mapped.message, {
    retryable: mapped.retryable,
    cause: mapped.cause,
  })
}
