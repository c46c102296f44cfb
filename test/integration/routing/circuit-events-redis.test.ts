import { randomUUID } from 'node:crypto'
import { Redis } from 'ioredis'
import { afterAll, describe, expect, test } from 'vitest'
import { RedisServiceEventLog } from '../../../src/lifecycle/service-events.js'
import type { ServiceEvent } from '../../../src/lifecycle/service-events.js'
import { RedisCircuitBreaker } from '../../../src/routing/circuit-breaker.js'
import type { CircuitTransition } from '../../../src/routing/circuit-breaker.js'
import { circuitEvent } from '../../../src/routing/circuit-events.js'

const redisUrl = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379'
const prefix = `test-circuit-${randomUUID()}`
const redis = new Redis(redisUrl)
const clients: Redis[] = []

afterAll(async () => {
  for (const c of clients) c.disconnect()
  const keys = await redis.keys(`${prefix}:*`)
  if (keys.length) await redis.del(...keys)
  redis.disconnect()
})

const track = (c: Redis): Redis => (clients.push(c), c)

/**
 * Several processes share one circuit through Redis: racing failures, probes and successes are told
 * once fleet-wide, by whichever breaker made the transition; the events reach a reader of the
 * service's Redis event stream.
 */
describe('RedisCircuitBreaker transitions across processes', () => {
  test('each transition is told once by exactly one of four breakers', async () => {
    const seen: { by: number; t: CircuitTransition }[] = []
    const log = new RedisServiceEventLog(redis, prefix)
    const breakers = [0, 1, 2, 3].map(
      (by) =>
        new RedisCircuitBreaker(
          track(redis.duplicate()),
          prefix,
          { failureThreshold: 3, cooldownMs: 300 },
          (t) => {
            seen.push({ by, t })
            void log.append(circuitEvent(t))
          },
        ),
    )
    // 12 failures at once from four "processes": one opening.
    await Promise.all(breakers.flatMap((b) => [1, 2, 3].map((i) => b.failure('dt', `429 #${i}`))))
    expect(seen.map((s) => s.t.to)).toEqual(['open'])
    expect(seen[0]?.t.reason).toMatch(/^3 consecutive failed create\(s\); last: 429 #\d$/)

    // After the cool-down (a deadline, not an event), four callers at once: one probe (one half-open event).
    const state = await breakers[0]!.state('dt')
    await new Promise((r) => setTimeout(r, Math.max(0, (state.openUntil ?? 0) - Date.now() + 20)))
    const allowed = await Promise.all(breakers.map((b) => b.allow('dt')))
    expect(allowed.filter(Boolean)).toHaveLength(1)
    // Successes from all four: one closing.
    await Promise.all(breakers.map((b) => b.success('dt')))
    expect(seen.map((s) => `${s.t.from}→${s.t.to}`)).toEqual([
      'closed→open',
      'open→half-open',
      'half-open→closed',
    ])

    // A reader of the stream gets the three events, in order, with ids to resume after.
    const ac = new AbortController()
    const got: ServiceEvent[] = []
    for await (const e of log.stream(undefined, ac.signal)) {
      got.push(e)
      if (got.length === 3) ac.abort()
    }
    expect(got.map((e) => [e.type, e.attributes['provider']])).toEqual([
      ['CIRCUIT_OPEN', 'dt'],
      ['CIRCUIT_HALF_OPEN', 'dt'],
      ['CIRCUIT_CLOSED', 'dt'],
    ])
    // Resuming after the first gets the two later ones only.
    const ac2 = new AbortController()
    const later: string[] = []
    for await (const e of log.stream(got[0]!.id, ac2.signal)) {
      later.push(e.type)
      if (later.length === 2) ac2.abort()
    }
    expect(later).toEqual(['CIRCUIT_HALF_OPEN', 'CIRCUIT_CLOSED'])
  })
})
