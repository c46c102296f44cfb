/**
 * Translation of e2b SDK errors at the provider edge, by error class (never by message text), and
 * redaction of the API key from anything that leaves the provider.
 */
import {
  AuthenticationError,
  FileNotFoundError,
  InvalidArgumentError,
  NotEnoughSpaceError,
  NotFoundError,
  RateLimitError,
  SandboxError,
  SandboxNotFoundError,
  ServiceBusyError,
  TemplateError,
  TimeoutError,
} from 'e2b'
import { AppError, scrubSecret, secretSafeCause } from '../../src/sandbox/index.js'

/** Where requests go, for messages (the key only to redact it). */
export interface ErrorContext {
  apiKey: string
  /** The control-plane URL in use. */
  apiUrl: string
  /** The envd URL in use (`sandboxUrl`, or the per-sandbox host pattern). */
  sandboxUrl: string
}

/** What was being done, for the message (`creating a sandbox`, `running a command in sandbox X`). */
export interface ErrorSite {
  what: string
  /** Set when the operation targets one sandbox: not-found then means SANDBOX_LOST. */
  sandboxId?: string
  /** A create: transient failures become a retryable SANDBOX_CREATE_FAILED. */
  create?: boolean
  /** Whether the failure came from envd (inside the sandbox) rather than the control plane. */
  envd?: boolean
}

const NETWORK_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ENOTFOUND',
  'EAI_AGAIN',
  'ETIMEDOUT',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'EPIPE',
  'UND_ERR_CONNECT_TIMEOUT',
  'UND_ERR_SOCKET',
])

/** The network error code (ECONNREFUSED…) of a failed fetch, if that is what `err` is. */
export function networkCode(err: unknown): string | undefined {
  for (let e: unknown = err, depth = 0; e instanceof Error && depth < 4; e = e.cause, depth++) {
    const code = (e as { code?: unknown }).code
    if (typeof code === 'string' && NETWORK_CODES.has(code)) return code
  }
  return undefined
}

/**
 * Maps an SDK (or fetch) error to an `AppError`:
 * AuthenticationError → CONFIG_INVALID naming E2B_API_KEY; RateLimitError → retryable RATE_LIMITED
 * (SANDBOX_CREATE_FAILED on create); SandboxNotFoundError / NotFoundError on a sandbox →
 * SANDBOX_LOST; FileNotFoundError → NOT_FOUND; TimeoutError → retryable SANDBOX_TIMEOUT; an
 * unreachable API or sandbox → retryable UNAVAILABLE naming the URL.
 */
export function mapE2BError(err: unknown, site: ErrorSite, ctx: ErrorContext): AppError {
  if (err instanceof AppError) return err
  const cause = secretSafeCause(err, ctx.apiKey)
  const detail = scrubSecret(err instanceof Error ? err.message : String(err), ctx.apiKey)
  const make = (code: AppError['code'], message: string, retryable = false): AppError => {
    if (site.create && code !== 'CONFIG_INVALID' && code !== 'BAD_REQUEST') {
      return new AppError('SANDBOX_CREATE_FAILED', message, { retryable, cause })
    }
    return new AppError(code, message, { retryable, cause })
  }
  if (err instanceof AuthenticationError) {
    return make(
      'CONFIG_INVALID',
      `E2B rejected the API key while ${site.what} (401); set a valid E2B_API_KEY (providers.e2b.apiKey)`,
    )
  }
  if (err instanceof RateLimitError) {
    return make(
      'RATE_LIMITED',
      `E2B rate limit or concurrent-sandbox quota reached while ${site.what} (429: ${detail}); ` +
        `retry later, lower the pool sizes, or raise the quota`,
      true,
    )
  }
  if (err instanceof ServiceBusyError) {
    return make('UNAVAILABLE', `E2B is busy (503) while ${site.what}; retry shortly`, true)
  }
  if (err instanceof FileNotFoundError) return make('NOT_FOUND', `no such file while ${site.what}`)
  if ((err instanceof SandboxNotFoundError || err instanceof NotFoundError) && site.sandboxId) {
    return new AppError(
      'SANDBOX_LOST',
      `sandbox ${site.sandboxId} no longer exists in E2B (killed, expired, or destroyed); create a new sandbox`,
      { cause },
    )
  }
  if (err instanceof TemplateError) {
    return make(
      'CONFIG_INVALID',
      `while ${site.what}: the template's envd is too old for this SDK; rebuild the template`,
    )
  }
  if (err instanceof InvalidArgumentError)
    return make('BAD_REQUEST', `invalid request while ${site.what}: ${detail}`)
  if (err instanceof NotEnoughSpaceError) {
    return make(
      'NO_SPACE',
      `sandbox ${site.sandboxId ?? ''} is out of disk space while ${site.what}; delete files in it or use a template with more disk`,
    )
  }
  if (err instanceof TimeoutError) {
    return make('SANDBOX_TIMEOUT', `E2B did not answer in time while ${site.what} (${detail})`, true)
  }
  const net = networkCode(err)
  if (net) {
    const url = site.envd ? ctx.sandboxUrl : ctx.apiUrl
    const fix = site.envd ? 'check providers.e2b.sandboxUrl / domain' : 'check providers.e2b.apiUrl / domain'
    return make(
      'UNAVAILABLE',
      `cannot reach E2B at ${url} (${net}) while ${site.what}; ${fix} and the network`,
      true,
    )
  }
  if (err instanceof SandboxError) {
    const status = err.statusCode
    if (site.create && (status === 400 || status === 404)) {
      return make('CONFIG_INVALID', `E2B refused the sandbox (${detail}); check the profile's template`)
    }
    const retryable = status === undefined || status >= 500
    const where = site.envd && site.sandboxId ? ` (sandbox ${site.sandboxId} at ${ctx.sandboxUrl})` : ''
    return make('UNAVAILABLE', `E2B failed while ${site.what}${where}: ${detail}`, retryable)
  }
  return make('INTERNAL', `unexpected failure while ${site.what}: ${detail}`, true)
}
