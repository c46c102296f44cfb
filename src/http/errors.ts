import type { ContentfulStatusCode } from 'hono/utils/http-status'
import { AppError } from '../errors.js'
import type { ErrorCode } from '../errors.js'

/** HTTP status of every error code (one table, used by the one error handler). */
export const STATUS_OF: Record<ErrorCode, ContentfulStatusCode> = {
  BAD_REQUEST: 400,
  CONFIG_INVALID: 400,
  UNAUTHORIZED: 401,
  FORBIDDEN: 403,
  NOT_FOUND: 404,
  CONFLICT: 409,
  PAYLOAD_TOO_LARGE: 413,
  RATE_LIMITED: 429,
  QUOTA_EXCEEDED: 429,
  // The sandbox's disk is full: retrying does not help until files are deleted (507 Insufficient Storage).
  NO_SPACE: 507,
  UNAVAILABLE: 503,
  QUEUE_UNAVAILABLE: 503,
  EXTENSION_ERROR: 500,
  INTERCEPTOR_FAILED: 500,
  UNKNOWN_PROVIDER: 400,
  UNKNOWN_PROFILE: 400,
  SANDBOX_LOST: 502,
  SANDBOX_CREATE_FAILED: 503,
  SANDBOX_TIMEOUT: 504,
  ACQUIRE_TIMEOUT: 503,
  JOB_INTERRUPTED: 409,
  JOB_CANCELLED: 409,
  // The session's provider lacks the capability (e.g. background processes): 501 Not Implemented.
  UNSUPPORTED: 501,
  INTERNAL: 500,
}

/** The JSON body of every error response. */
export interface ErrorBody {
  error: { code: ErrorCode; message: string }
}

/** Maps any thrown value to a status and a body; unknown errors become a generic 500 (no internals leak). */
export function toErrorResponse(err: unknown): { status: ContentfulStatusCode; body: ErrorBody } {
  if (err instanceof AppError) {
    return { status: STATUS_OF[err.code], body: { error: { code: err.code, message: err.message } } }
  }
  return { status: 500, body: { error: { code: 'INTERNAL', message: 'internal error; see the server log' } } }
}
