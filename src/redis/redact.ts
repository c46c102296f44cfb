/**
 * @module
 * Redis URLs in messages and logs, without their secrets.
 */

/** The URL without its password (`redis://user:***@host:6379`), for messages and logs. */
export function redactUrl(url: string): string {
  try {
    const u = new URL(url)
    if (u.password) u.password = '***'
    return u.toString()
  } catch {
    return '(unparseable REDIS_URL)'
  }
}
