import { Redis } from 'ioredis'

/** Redis of this machine (the tests never mock it); `REDIS_URL` points elsewhere. */
export const REDIS_URL = process.env['REDIS_URL'] ?? 'redis://127.0.0.1:6379'

/**
 * The Redis queue driver of the fleet tests that run one driver per run (the fault tests, fleet
 * configs of test/support/sbx-cli.ts): the product's fleet default, `redis`, so they test what a user
 * runs; `SBX_TEST_QUEUE_DRIVER=bullmq` runs them on BullMQ (suites that matter on both loop over both).
 * @default 'redis'
 */
export const FLEET_DRIVER: 'bullmq' | 'redis' =
  process.env['SBX_TEST_QUEUE_DRIVER'] === 'bullmq' ? 'bullmq' : 'redis'

/**
 * Deletes every key matching `pattern` (a test's own namespace, e.g. `${prefix}*`), through `redis`
 * when given, else through a connection of its own.
 */
export async function deleteKeys(pattern: string, redis?: Redis): Promise<void> {
  const client = redis ?? new Redis(REDIS_URL)
  try {
    let cursor = '0'
    do {
      const [next, keys] = await client.scan(cursor, 'MATCH', pattern, 'COUNT', 500)
      cursor = next
      if (keys.length > 0) await client.del(...keys)
    } while (cursor !== '0')
  } finally {
    if (!redis) client.disconnect()
  }
}
