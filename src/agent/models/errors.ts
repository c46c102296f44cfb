import { AppError, assertNever, type ErrorCode } from '../../errors.js'

/**
 * What went wrong with a provider call, classified by each client from its SDK's error classes (never
 * from message text), so one table turns every provider's failures into the same {@link AppError}s.
 */
export type ProviderFailure =
  | { readonly kind: 'status'; readonly status: number; readonly providerMessage: string }
  | { readonly kind: 'timeout' }
  | { readonly kind: 'connection' }
  | { readonly kind: 'other' }

/** Where a failed call was going, for the error message. */
export interface ProviderCallInfo {
  /** Human label of the provider, e.g. `OpenAI-compatible API`. */
  readonly label: string
  readonly baseURL: string
  readonly timeoutMs: number
  readonly maxRetries: number
  /** Scrubbed from every message, in case the server echoes it back. */
  readonly apiKey: string
}

interface StatusRule {
  readonly code: ErrorCode
  readonly retryable: boolean
  readonly fix: string
}

/** HTTP status (after the SDK's own retries) -> stable error code (e2b `DEFAULT_ERROR_MAP` style). */
const STATUS_RULES: Readonly<Record<number, StatusRule>> = {
  400: {
    code: 'BAD_REQUEST',
    retryable: false,
    fix: "check the request: 'model', messages and tool schemas",
  },
  401: { code: 'UNAUTHORIZED', retryable: false, fix: "check 'apiKey'" },
  402: { code: 'QUOTA_EXCEEDED', retryable: false, fix: "check the provider account's billing" },
  403: { code: 'FORBIDDEN', retryable: false, fix: "check that 'apiKey' may use this model" },
  404: { code: 'NOT_FOUND', retryable: false, fix: "check 'model' and 'baseURL'" },
  408: { code: 'UNAVAILABLE', retryable: true, fix: "retry later or raise 'maxRetries'" },
  409: { code: 'CONFLICT', retryable: true, fix: "retry later or raise 'maxRetries'" },
  413: { code: 'PAYLOAD_TOO_LARGE', retryable: false, fix: 'shorten the conversation (compact the session)' },
  422: {
    code: 'BAD_REQUEST',
    retryable: false,
    fix: "check the request: 'model', messages and tool schemas",
  },
  429: { code: 'RATE_LIMITED', retryable: true, fix: "retry later or raise 'maxRetries'" },
}
const SERVER_ERROR: StatusRule = {
  code: 'UNAVAILABLE',
  retryable: true,
  fix: 'the provider is failing; retry later',
}
const OTHER_CLIENT_ERROR: StatusRule = {
  code: 'BAD_REQUEST',
  retryable: false,
  fix: "check the request: 'model', messages and tool schemas",
}

/**
 * Builds the {@link AppError} a model client throws. Its message carries the provider's own error
 * message (with the API key scrubbed out) and a fix; the SDK error is the `cause`.
 */
export function toModelError(failure: ProviderFailure, info: ProviderCallInfo, cause: unknown): AppError {
  const scrub = (text: string): string => (info.apiKey ? text.split(info.apiKey).join('[redacted]') : text)
  const tries = `${info.maxRetries + 1} attempt(s)`
  switch (failure.kind) {
    case 'status': {
      const rule = STATUS_RULES[failure.status] ?? (failure.status >= 500 ? SERVER_ERROR : OTHER_CLIENT_ERROR)
      const message = `${info.label} returned HTTP ${failure.status} after ${tries}: ${failure.providerMessage}; ${rule.fix}.`
      return new AppError(rule.code, scrub(message), { retryable: rule.retryable, cause })
    }
    case 'timeout':
      return new AppError(
        'UNAVAILABLE',
        scrub(
          `${info.label} at ${info.baseURL} did not answer within ${info.timeoutMs} ms (${tries}); raise 'timeoutMs'.`,
        ),
        { retryable: true, cause },
      )
    case 'connection':
      return new AppError(
        'UNAVAILABLE',
        scrub(
          `${info.label} at ${info.baseURL} could not be reached (${tries}); check 'baseURL' and the network.`,
        ),
        { retryable: true, cause },
      )
    case 'other': {
      const detail = cause instanceof Error ? cause.message : String(cause)
      return new AppError('INTERNAL', scrub(`${info.label} call failed: ${detail}`), { cause })
    }
    default:
      return assertNever(failure)
  }
}
