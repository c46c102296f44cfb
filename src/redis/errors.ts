/**
 * @module
 * Telling a Redis outage apart from other failures, and turning it into the service's error.
 */
import { AppError } from '../errors.js'

/**
 * What ioredis (and BullMQ, which reuses its wording) reject commands with when the server is away:
 * the offline queue is off, the per-request retries ran out, or the connection closed under the
 * command. The one list of these messages in the service.
 */
export const UNREACHABLE_MESSAGES: readonly string[] = [
  "Stream isn't writeable",
  'Connection is closed',
  'Reached the max retries per request limit',
]

/**
 * Whether `err` (or an error in its `cause` chain) says Redis could not be reached, as opposed to a
 * reply error or a bug. Matches ioredis' own connection errors only, so a Docker socket refusing a
 * connection is not mistaken for Redis.
 */
export function isRedisUnreachable(err: unknown): boolean {
  let e: unknown = err
  for (let depth = 0; depth < 6 && e instanceof Error; depth++) {
    if (e.name === 'MaxRetriesPerRequestError') return true
    if (UNREACHABLE_MESSAGES.some((m) => (e as Error).message.includes(m))) return true
    e = e.cause
  }
  return false
}

/**
 * `err` as the queue's error: QUEUE_UNAVAILABLE (retryable, naming `what` failed) when Redis could not be
 * reached; AppErrors and other errors unchanged.
 */
export function queueUnavailable(err: unknown, what: string): unknown {
  if (err instanceof AppError || !isRedisUnreachable(err)) return err
  return new AppError(
    'QUEUE_UNAVAILABLE',
    `${what} failed: Redis is unreachable (${(err as Error).message}); retry once Redis is back.`,
    { retryable: true, cause: err },
  )
}
