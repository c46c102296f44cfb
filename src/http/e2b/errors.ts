/**
 * E2B's error shapes: the control plane answers `{ code, message }` with the HTTP status as `code`
 * (the SDK shows `message`); our AppErrors map to their usual statuses.
 */
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
  const headers: Record<string, string> = status === 429 ? { 'retry-after': '1' } : {}
  return Response.json({ code: status, message: body.error.message }, { status, headers })
}
