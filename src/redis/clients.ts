/**
 * @module
 * The service's Redis connections: the only place an ioredis client is constructed, one
 * documented option set per {@link RedisRole}, and their connect, readiness and close.
 */
import { Redis } from 'ioredis'
import type { RedisOptions } from 'ioredis'
import { AppError } from '../errors.js'
import { redactUrl } from './redact.js'

/** The roles the service's Redis connections play; each gets the options its user expects. */
export type RedisRole =
  /**
   * Producer commands (BullMQ Queue, fence scripts, publish): fail fast instead of buffering while
   * Redis is down (offline queue off, one retry per request).
   */
  | 'command'
  /** Blocking commands (BullMQ Worker, the `redis` queue driver's take): retry forever, as BullMQ requires. */
  | 'blocking'
  /** Pub/sub subscriber (live output, cancel broadcast): re-subscribes after reconnects. */
  | 'subscriber'
  /**
   * Stores (sessions, session directory, agent runs, engines): while Redis is away a command waits for
   * one reconnect attempt (about a second), then fails, so the API answers 503 instead of hanging.
   */
  | 'store'

/** Longest pause between reconnect attempts while Redis is away (ms). */
export const RECONNECT_MAX_DELAY_MS = 1_000

/** How long a connection attempt may take before it counts as failed (ms). */
const CONNECT_TIMEOUT_MS = 5_000

/**
 * The reconnect schedule of the service's Redis clients: 100, 200, 400, 800 ms, then every second (plus
 * up to 100 ms of jitter). ioredis' default backs off to 5 s, which would add up to 5 s to the recovery
 * of every worker and producer after a Redis restart; a refused connect once a second is cheap.
 */
export function reconnectDelayMs(times: number): number {
  return Math.min(100 * 2 ** Math.max(0, times - 1), RECONNECT_MAX_DELAY_MS) + Math.floor(Math.random() * 100)
}

/**
 * The ioredis options of `role` (all roles: lazy connect, a 5 s connect timeout and
 * {@link reconnectDelayMs}). `name` becomes the connection's CLIENT SETNAME where it has one.
 */
export function redisOptions(role: RedisRole, name: string): RedisOptions {
  const base: RedisOptions = {
    lazyConnect: true,
    connectTimeout: CONNECT_TIMEOUT_MS,
    retryStrategy: reconnectDelayMs,
  }
  switch (role) {
    case 'command':
      return { ...base, connectionName: name, enableOfflineQueue: false, maxRetriesPerRequest: 1 }
    case 'blocking':
    case 'subscriber':
      return { ...base, connectionName: name, maxRetriesPerRequest: null }
    case 'store':
      return { ...base, connectionName: name, maxRetriesPerRequest: 1 }
  }
}

/**
 * Creates an unconnected ioredis client for `role` (call {@link connectRedis}, or let the first command
 * connect it). Connection errors surface as rejected commands and ioredis reconnects by itself; the
 * client carries a no-op `error` listener, without which ioredis would print every failed reconnect.
 *
 * @example
 * const client = createRedisClient(url, 'command', 'sbx-queue:sbx-exec')
 * await connectRedis(client, url, 5_000)
 */
export function createRedisClient(url: string, role: RedisRole, name: string): Redis {
  const client = new Redis(url, redisOptions(role, name))
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
