import { randomUUID } from 'node:crypto'
import { Redis } from 'ioredis'
import { afterEach, describe, expect, test } from 'vitest'
import { FleetRateLimiter } from '../../../src/services/fleet-rate-limit.js'
import { deleteKeys, REDIS_URL } from '../../support/redis.js'

/**
 * `quotas.requestsPerSecond` for the whole fleet: every API process draws on one bucket per tenant in
 * Redis (in batches), so N processes admit what one does, not N times as much.
 */
describe('FleetRateLimiter: one bucket per tenant for every API process', () => {
  const clients: Redis[] = []
  const base = `sbxtest-${randomUUID().slice(0, 8)}:rate:`
  afterEach(async () => {
    await deleteKeys(`${base}*`)
    for (const c of clients.splice(0)) c.disconnect()
  })
  /** A limiter as one API process holds it (its own connection). */
  async function process(rate: number): Promise<FleetRateLimiter> {
    const client = new Redis(REDIS_URL)
    clients.push(client)
    await new Promise<void>((resolve) => client.once('ready', () => resolve()))
    return new FleetRateLimiter(client, base, rate)
  }

  test('two processes together admit the burst, not twice it; refusals say when to retry; tenants are apart', async () => {
    const [a, b] = [await process(5), await process(5)]
    // 40 requests at once, half through each process: the bucket holds a burst of 10.
    const verdicts = await Promise.all(Array.from({ length: 40 }, (_, i) => (i % 2 ? a : b).take('acme')))
    const passed = verdicts.filter((v) => v.ok).length
    // The bucket refills at 5/s while the burst is served: at most one more token in that time.
    expect(passed).toBeGreaterThanOrEqual(10)
    expect(passed).toBeLessThanOrEqual(11)
    const refused = verdicts.find((v) => !v.ok)
    expect(refused).toMatchObject({ ok: false })
    expect(refused && !refused.ok && refused.retryAfterMs).toBeGreaterThan(0)
    // Another tenant has its own bucket.
    expect(await a.take('globex')).toEqual({ ok: true })
  })

  test('one process alone may use the whole rate', async () => {
    const a = await process(20)
    const verdicts = await Promise.all(Array.from({ length: 40 }, () => a.take('acme')))
    expect(verdicts.filter((v) => v.ok).length).toBeGreaterThanOrEqual(40)
  })

  test('with Redis unreachable each process limits by itself', async () => {
    const client = new Redis('redis://127.0.0.1:1', { lazyConnect: true, retryStrategy: () => null })
    clients.push(client)
    const alone = new FleetRateLimiter(client, base, 5)
    const verdicts = await Promise.all(Array.from({ length: 20 }, () => alone.take('acme')))
    expect(verdicts.filter((v) => v.ok).length).toBe(10)
  })
})
