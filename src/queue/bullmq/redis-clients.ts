import { Redis } from 'ioredis'
import type { RedisOptions } from 'ioredis'
import { AppError } from '../../errors.js'

/** The roles a queue's Redis connections play; each gets the options BullMQ expects for it. */
export type RedisRole =
  /** Producer commands (Queue, fence scripts, publish): fail fast instead of buffering while Redis is down. */
  | 'command'
  /** BullMQ Worker (blocking commands): retry forever, as BullMQ requires. */
  | 'blocking'
  /** Pub/sub subscriber (live output, cancel broadcast): re-subscribes after reconnects. */
  | 'subscriber'

/** Longest pause between reconnect attempts while Redis is away (ms). */
export const RECONNECT_MAX_DELAY_MS = 1_000

/**
 * The reconnect schedule of the service's Redis clients: 100, 200, 400, 800 ms, then every second (plus
 * up to 100 ms of jitter). ioredis' default backs off to 5 s, which would add up to 5 s to the recovery
 * of every worker and producer after a Redis restart; a refused connect once a second is cheap.
 */
export function reconnectDelayMs(times: number): number {
  return Math.min(100 * 2 ** Math.max(0, times - 1), RECONNECT_MAX_DELAY_MS) + Math.floor(Math.random() * 100)
}

/** Creates an unconnected ioredis client for `role` (call {@link connectRedis}). */
export function createRedisClient(url: string, role: RedisRole, name: string): Redis {
  const base: RedisOptions = {
    lazyConnect: true,
    connectionName: name,
    connectTimeout: 5_000,
    retryStrategy: reconnectDelayMs,
  }
  const client =
    role === 'command'
      ? new Redis(url, { ...base, enableOfflineQueue: false, maxRetriesPerRequest: 1 })
      : new Redis(url, { ...base, maxRetriesPerRequest: null })
  // Connection errors surface as rejected commands (QUEUE_UNAVAILABLE) and ioredis reconnects by
  // itself; without a listener ioredis would print every failed reconnect.
  client.on('error', () => undefined)
  return client
}

/** Connects and waits until ready; rejects with QUEUE_UNAVAILABLE (and disconnects) on failure. */
export async function connectRedis(client: Redis, url: string, timeoutMs: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined
  // The socket's error (e.g. ECONNREFUSED) says more than connect()'s "Connection is closed.".
  let socketError: Error | undefined
  const onError = (err: Error): void => {
    socketError = err
  }
  client.on('error', onError)
  try {
    await Promise.race([
      client.connect(),
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error(`no answer within ${timeoutMs} ms`)), timeoutMs)
      }),
    ])
  } catch (err) {
    client.disconnect()
    const why = socketError ?? err
    throw new AppError(
      'QUEUE_UNAVAILABLE',
      `Cannot reach Redis at ${redactUrl(url)} (${why instanceof Error ? why.message : String(why)}); ` +
        'start Redis or set REDIS_URL, or use the in-process queue.',
      { retryable: true, cause: err },
    )
  } finally {
    clearTimeout(timer)
    client.off('error', onError)
  }
}

// What ioredis (and BullMQ, which reuses its wording) reject commands with when the server is away:
// the offline queue is off, the per-request retries ran out, or the connection closed under the command.
const UNREACHABLE_MESSAGES = [
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

/**
 * Resolves `true` once `client` is ready (at once when it is), `false` after `timeoutMs`, when `signal`
 * aborts, or when the client is closed for good.
 */
export function whenReady(client: Redis, timeoutMs: number, signal?: AbortSignal): Promise<boolean> {
  if (client.status === 'ready') return Promise.resolve(true)
  if (client.status === 'end' || signal?.aborted) return Promise.resolve(false)
  return new Promise((resolve) => {
    const done = (ok: boolean) => (): void => {
      clearTimeout(timer)
      client.off('ready', onReady)
      client.off('end', onEnd)
      signal?.removeEventListener('abort', onEnd)
      resolve(ok)
    }
    const onReady = done(true)
    const onEnd = done(false)
    const timer = setTimeout(onEnd, timeoutMs)
    client.once('ready', onReady)
    client.once('end', onEnd)
    signal?.addEventListener('abort', onEnd, { once: true })
  })
}

/**
 * Closes a client politely, falling back to a hard disconnect. While the client is not connected (Redis
 * away) it disconnects at once: a QUIT would wait in the offline queue for Redis to come back.
 */
export async function quitRedis(client: Redis): Promise<void> {
  if (client.status === 'end') return
  if (client.status !== 'ready') {
    client.disconnect()
    return
  }
  try {
    await client.quit()
  } catch {
    client.disconnect()
  }
}

/** The URL without its password, for messages. */
export function redactUrl(url: string): string {
  try {
    const u = new URL(url)
    if (u.password) u.password = '***'
    return u.toString()
  } catch {
    return '(unparseable REDIS_URL)'
  }
}
