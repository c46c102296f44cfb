import { describe, expect, test } from 'vitest'
import { AppError } from '../../../src/errors.js'
import { MemoryCircuitBreaker } from '../../../src/routing/circuit-breaker.js'
import { RoutePolicies, RoutePolicySchema } from '../../../src/routing/policies.js'
import { PolicyPool } from '../../../src/routing/policy-pool.js'
import type { PolicyLease } from '../../../src/routing/policy-pool.js'
import { ProfileCatalog, resolveProfile } from '../../../src/sandbox/profiles.js'
import { BoundReached } from '../../../src/sessions/bounds.js'
import type { Lease, SessionKey, SessionPool, SessionState } from '../../../src/sessions/types.js'

/**
 * The policy logic over a scripted {@link SessionPool} (our own interface; the real pool is covered
 * by the e2e test through `sbx api` + `sbx worker`): which candidate each mode tries, when it falls
 * over, and the circuit's states.
 */
const profiles = [
  resolveProfile('a', { provider: 'pa' }),
  resolveProfile('b', { provider: 'pb' }),
  resolveProfile('c', { provider: 'pc' }),
]
const targets = new ProfileCatalog(['pa', 'pb', 'pc'], profiles)

/** A pool whose acquire fails per provider as scripted, and which records every attempt. */
function scriptedPool(failures: Record<string, unknown> = {}) {
  const tried: string[] = []
  const bound = new Map<string, string>()
  const sessionOf = (k: SessionKey) => `${k.tenant}/${k.sessionId ?? ''}/${k.providerId}`
  const pool: SessionPool = {
    acquire(key) {
      tried.push(key.providerId)
      const fail = failures[key.providerId]
      if (fail) return Promise.reject(fail)
      if (key.sessionId !== undefined) bound.set(sessionOf(key), 'sb')
      const lease: Lease = {
        key,
        sandbox: {} as Lease['sandbox'],
        ref: { providerId: key.providerId, id: 'sb', profile: key.profile },
        hit: false,
        release: () => Promise.resolve(),
        closedMeanwhile: () => Promise.resolve(false),
      }
      return Promise.resolve(lease)
    },
    state: (key): Promise<SessionState> =>
      Promise.resolve(bound.has(sessionOf(key)) ? { sandboxId: 'sb' } : {}),
    close: (key) => Promise.resolve(void bound.delete(sessionOf(key))),
    admit: () => Promise.resolve(),
    acknowledge: () => Promise.resolve(undefined),
    reap: () => Promise.resolve(0),
    shutdown: () => Promise.resolve(),
    stats: () => ({}) as ReturnType<SessionPool['stats']>,
  }
  return { pool, tried }
}

function policies(mode: string, extra: Record<string, unknown>[] = [{}, {}, {}]) {
  const candidates = ['a', 'b', 'c'].map((p, i) => ({ provider: `p${p}`, profile: p, ...extra[i] }))
  return new RoutePolicies({ pol: RoutePolicySchema.parse({ mode, candidates }) }, targets, [
    'pa',
    'pb',
    'pc',
  ])
}

const key = (sessionId?: string): SessionKey => ({
  tenant: 't',
  providerId: 'pol',
  profile: 'auto',
  ...(sessionId ? { sessionId } : {}),
})
const breaker = () => new MemoryCircuitBreaker({ failureThreshold: 2, cooldownMs: 1_000 })
const createFailed = (msg: string) => new AppError('SANDBOX_CREATE_FAILED', msg, { retryable: true })

describe('PolicyPool', () => {
  test('failover: the next candidate after a failed create; the route says what was skipped', async () => {
    const { pool, tried } = scriptedPool({ pa: createFailed('engine down') })
    const lease = (await new PolicyPool(pool, policies('failover'), breaker()).acquire(key())) as PolicyLease
    expect(tried).toEqual(['pa', 'pb'])
    expect(lease.route).toEqual({
      policy: 'pol',
      providerId: 'pb',
      profile: 'b',
      pinned: false,
      skipped: [{ providerId: 'pa', profile: 'a', reason: 'engine down' }],
    })
  })

  test("spillover: past a profile's capacity or a 429 only, never past the tenant's own quota", async () => {
    const cap = scriptedPool({ pa: new BoundReached('profile', 'profile a is full') })
    await new PolicyPool(cap.pool, policies('spillover'), breaker()).acquire(key())
    expect(cap.tried).toEqual(['pa', 'pb'])
    const rate = scriptedPool({ pa: createFailed('Daytona refused the create with HTTP 429') })
    await new PolicyPool(rate.pool, policies('spillover'), breaker()).acquire(key())
    expect(rate.tried).toEqual(['pa', 'pb'])
    const down = scriptedPool({ pa: createFailed('engine down') })
    await expect(new PolicyPool(down.pool, policies('spillover'), breaker()).acquire(key())).rejects.toThrow(
      'engine down',
    )
    const tenant = scriptedPool({ pa: new BoundReached('tenant', 'tenant t is full') })
    await expect(
      new PolicyPool(tenant.pool, policies('failover'), breaker()).acquire(key()),
    ).rejects.toBeInstanceOf(BoundReached)
    expect(tenant.tried).toEqual(['pa'])
  })

  test('cheapest orders by price; fastest tries unmeasured candidates first; weighted follows the weights', async () => {
    const cheap = scriptedPool()
    const prices = [{ pricePerSecond: 3 }, { pricePerSecond: 1 }, {}]
    await new PolicyPool(cheap.pool, policies('cheapest', prices), breaker()).acquire(key())
    expect(cheap.tried).toEqual(['pb'])

    const fast = scriptedPool()
    const fastest = new PolicyPool(fast.pool, policies('fastest'), breaker())
    for (let i = 0; i < 3; i++) await fastest.acquire(key())
    expect(new Set(fast.tried)).toEqual(new Set(['pa', 'pb', 'pc']))

    const weighted = scriptedPool()
    const draws = [0.005, 0.99]
    const w = new PolicyPool(
      weighted.pool,
      policies('weighted', [{ weight: 1 }, { weight: 0.001 }, { weight: 99 }]),
      breaker(),
      () => draws.shift() ?? 0.5,
    )
    await w.acquire(key()) // 0.5 of 100.001: the first candidate
    await w.acquire(key()) // 0.99 of 100.001: the heavy third
    expect(weighted.tried).toEqual(['pa', 'pc'])
  })

  test('a session stays pinned; a pinned candidate that fails is the error, with no move', async () => {
    const failures: Record<string, unknown> = {}
    const { pool, tried } = scriptedPool(failures)
    const p = new PolicyPool(pool, policies('failover'), breaker())
    expect(((await p.acquire(key('s'))) as PolicyLease).route?.providerId).toBe('pa')
    failures['pa'] = createFailed('engine down')
    await expect(p.acquire(key('s'))).rejects.toThrow(/pinned by routing policy 'pol' to pa\/a/)
    expect(tried).toEqual(['pa', 'pa'])
    // Deleting the session frees it: the next first call fails over.
    await p.close(key('s'))
    expect(((await p.acquire(key('s'))) as PolicyLease).route?.providerId).toBe('pb')
  })

  test('an open circuit is skipped; all candidates refusing is one error naming each', async () => {
    const { pool, tried } = scriptedPool({
      pa: createFailed('a down'),
      pb: createFailed('b down'),
      pc: createFailed('c down'),
    })
    const p = new PolicyPool(pool, policies('failover'), breaker())
    await expect(p.acquire(key())).rejects.toThrow(
      "routing policy 'pol' (failover): no candidate could take the call — pa/a: a down; pb/b: b down; pc/c: c down",
    )
    await expect(p.acquire(key())).rejects.toThrow(/no candidate/)
    // Two failures each (the threshold): every circuit is open, so the third call tries none.
    await expect(p.acquire(key())).rejects.toThrow(
      /pa\/a: circuit open after 2 failed create\(s\) \(last: a down\)/,
    )
    expect(tried).toEqual(['pa', 'pb', 'pc', 'pa', 'pb', 'pc'])
  })
})

describe('MemoryCircuitBreaker', () => {
  test('opens at the threshold, lets one probe through after the cool-down, closes on success', async () => {
    let now = 0
    const b = new MemoryCircuitBreaker({ failureThreshold: 2, cooldownMs: 1_000 }, () => now)
    await b.failure('p', 'x')
    expect(await b.allow('p')).toBe(true)
    await b.failure('p', 'y')
    expect(await b.state('p')).toEqual({ state: 'open', failures: 2, openUntil: 1_000, lastError: 'y' })
    expect(await b.allow('p')).toBe(false)
    now = 1_000
    expect((await b.state('p')).state).toBe('half-open')
    expect(await b.allow('p')).toBe(true)
    expect(await b.allow('p')).toBe(false) // one probe at a time
    await b.failure('p', 'z') // the probe failed: open again
    expect(await b.state('p')).toMatchObject({ state: 'open', openUntil: 2_000 })
    now = 2_000
    expect(await b.allow('p')).toBe(true)
    await b.success('p')
    expect(await b.state('p')).toEqual({ state: 'closed', failures: 0 })
  })
})
