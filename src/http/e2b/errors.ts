/**
 * E2B's error shapes: the control plane answers `{ code, message }` with the HTTP status as `code`
 * (the SDK shows `message`); our AppErrors map to their usual statuses.
 */
import { AppError } from '../../errors.js'
import { toErrorResponse } from '../errors.js'

/** An E2B control-plane or `/files` error with its HTTP status. */
export class E2BApiError extends Error {
  override readonly name = 'E2BApiError'
  constructor(
    readonly status: number,
    message: string,
    readonly headers: Record<string, string> = {},
  ) {
    super(message)
  }
}

/** The response E2B's SDK expects for `err`: its status and `{ code, message }`. */
export function e2bErrorResponse(err: unknown): Response {
  if (err instanceof E2BApiError)
    return Response.json(
      { code: err.status, message: err.message },
      { status: err.status, headers: err.headers },
    )
  const { status, body } = toErrorResponse(err)
  // As E2B: a rate limit says when to retry (the SDK waits and retries); a full concurrency quota
  // does not (the SDK fails at once, and the message says what to free).
  const retryAfterS =
    err instanceof AppError && err.code === 'RATE_LIMITED' && 'retryAfterS' in err
      ? Number(err.retryAfterS)
      : undefined
  const headers: Record<string, string> = retryAfterS ? { 'retry-after': String(retryAfterS) } : {}
  return Response.json({ code: status, message: body.error.message }, { status, headers })
}
