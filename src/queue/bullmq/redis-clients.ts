import { Redis } from 'ioredis'
import type { RedisOptions } from 'ioredis'
import { AppError } from '../../errors.js'

/** The roles a queue's Redis connections play; each gets the options BullMQ expects for it. */
export type RedisRole =
  /** Producer commands (Queue, fence scripts, publish): fail fast instead of buffering while Redis is down. */
  | 'command'
  /** BullMQ Worker / QueueEvents (blocking commands): retry forever, as BullMQ requires. */
  | 'blocking'
  /** Pub/sub subscriber (live output, cancel broadcast): re-subscribes after reconnects. */
  | 'subscriber'

/** Creates an unconnected ioredis client for `role` (call {@link connectRedis}). */
export function createRedisClient(url: string, role: RedisRole, name: string): Redis {
  const base: RedisOptions = { lazyConnect: true, connectionName: name, connectTimeout: 5_000 }
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
  try {
    await Promise.race([
      client.connect(),
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error(`no answer within ${timeoutMs} ms`)), timeoutMs)
      }),
    ])
  } catch (err) {
    client.disconnect()
    throw new AppError(
      'QUEUE_UNAVAILABLE',
      `Cannot reach Redis at ${redactUrl(url)} (${err instanceof Error ? err.message : String(err)}); ` +
        'start Redis or set REDIS_URL, or use the in-process queue.',
      { retryable: true, cause: err },
    )
  } finally {
    clearTimeout(timer)
  }
}

/** Closes a client politely, falling back to a hard disconnect. */
export async function quitRedis(client: Redis): Promise<void> {
  if (client.status === 'end') return
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
