import { AppError } from '../errors.js'

/**
 * A session id a client may choose: 1–128 letters, digits, `.`, `_` or `-`, and not `.` or `..`.
 * Session ids travel as one URL path segment (`DELETE /v1/sessions/:id`, its files), and `.` / `..`
 * are dot segments that every URL parser removes, so a session named that way could be created but
 * never reached or deleted again. Every other id of this alphabet round-trips through a path segment
 * unchanged (no character of it is percent-encoded).
 */
export const SESSION_ID_PATTERN = /^(?!\.{1,2}$)[A-Za-z0-9._-]{1,128}$/

/** The rule of {@link SESSION_ID_PATTERN}, as error messages state it. */
export const SESSION_ID_RULE =
  'a session id is 1–128 letters, digits, ".", "_" or "-", and not "." or ".." (it must survive a URL path segment)'

/** Whether `id` is an acceptable session id. */
export function isSessionId(id: string): boolean {
  return SESSION_ID_PATTERN.test(id)
}

/**
 * Throws `BAD_REQUEST` naming `field` and the rule unless `id` is an acceptable session id (for
 * entry points without a schema, such as the CLI's `--session`).
 */
export function assertSessionId(id: string, field = 'sessionId'): void {
  if (!isSessionId(id))
    throw new AppError(
      'BAD_REQUEST',
      `invalid ${field} ${JSON.stringify(id.slice(0, 200))}: ${SESSION_ID_RULE}`,
    )
}
