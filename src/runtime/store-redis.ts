import type { Redis } from 'ioredis'
import { AppError } from '../errors.js'
import { createRedisClient, redactUrl } from '../redis/index.js'
import type { SandboxHealth } from '../sandbox/types.js'

/**
 * The fleet's Redis client for sessions, the session directory and agent runs, connected. While
 * Redis is away a command waits for one reconnect attempt (about a second), then fails: the API
 * answers 503 instead of hanging (the `store` role of `src/redis`); `name` is its connection name in
 * Redis's client list. Throws `QUEUE_UNAVAILABLE` (retryable) when Redis does not answer.
 */
export async function connectStoreRedis(url: string, name: string): Promise<Redis> {
  const redis = createRedisClient(url, 'store', name)
  // Connection trouble surfaces through the commands and readiness(); ioredis reconnects by itself.
  let socketError: Error | undefined
  redis.on('error', (err: Error) => (socketError = err))
  try {
    await redis.connect()
  } catch (err) {
    // Stop the client's own reconnect loop: a caller retrying start-up must not pile up clients.
    redis.disconnect()
    // The socket's error (e.g. ECONNREFUSED) says more than connect()'s "Connection is closed.".
    const why = socketError ?? (err as Error)
    throw new AppError(
      'QUEUE_UNAVAILABLE',
      `cannot reach Redis at ${redactUrl(url)}: ${why.message}; start Redis or fix REDIS_URL`,
      { cause: why, retryable: true },
    )
  }
  return redis
}

/** Whether Redis answers PING (fails at once while the client is reconnecting). */
export async function redisHealth(redis: Redis, url: string): Promise<SandboxHealth> {
  const down = (why: string): SandboxHealth => ({
    ok: false,
    reason: `Redis at ${redactUrl(url)} is unreachable (${why}); jobs cannot be queued until it is back`,
  })
  if (redis.status !== 'ready') return down(`connection ${redis.status}`)
  let timer: NodeJS.Timeout | undefined
  try {
    await Promise.race([
      redis.ping(),
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error('no answer to PING within 2 s')), 2_000)
      }),
    ])
    return { ok: true }
  } catch (err) {
    return down((err as Error).message)
  } finally {
    clearTimeout(timer)
  }
}
