import type { Redis } from 'ioredis'
import { type RateVerdict, RateLimiter, type RequestLimiter } from './rate-limit.js'

/**
 * KEYS: bucket. ARGV: ratePerSecond burst want. The tenant's token bucket for the whole fleet (Redis
 * time): refills at the rate up to the burst, then grants up to `want` whole tokens. Returns
 * `{granted, retryAfterMs}` (`retryAfterMs` until one token is there again, when none was granted).
 * The bucket expires once it would be full anyway.
 */
const LEASE = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local rate = tonumber(ARGV[1])
local burst = tonumber(ARGV[2])
local b = redis.call('HMGET', KEYS[1], 'tokens', 'at')
local tokens = tonumber(b[1]) or burst
local at = tonumber(b[2]) or now
tokens = math.min(burst, tokens + math.max(0, now - at) * rate / 1000)
local granted = math.min(tonumber(ARGV[3]), math.floor(tokens))
tokens = tokens - granted
redis.call('HSET', KEYS[1], 'tokens', tostring(tokens), 'at', now)
redis.call('PEXPIRE', KEYS[1], math.ceil(burst * 1000 / rate) + 1000)
if granted >= 1 then return {granted, 0} end
return {0, math.ceil((1 - tokens) * 1000 / rate)}
`

/**
 * How long tokens taken from the fleet's bucket stay spendable here (ms); unspent ones then lapse.
 * Spending a token later than it was granted never lets the fleet pass more than the bucket gave
 * out: at most one early batch per process.
 */
const LEASE_MS = 5_000

interface Lease {
  tokens: number
  until: number
  retryAfterMs: number
  /** The last lease got all it asked for: the bucket may hold more. */
  full: boolean
  /** Requests waiting for tokens (the next lease asks for at least as many). */
  waiting: number
  /** The lease in flight; every request waiting on it gets its outcome. */
  refill?: Promise<'ok' | 'unreachable'>
}

/**
 * Requests per second per tenant for the whole fleet (`quotas.requestsPerSecond`, burst 2×): one
 * token bucket per tenant in Redis, which every API process draws on in batches (a quarter of the
 * rate), spending them locally, and refills before its batch runs out. A request waits on Redis only
 * when its process holds no token of the tenant; Redis is asked about once per batch (five commands
 * in one script) or when its batch lapses (5 s). The fleet never passes more than the bucket gives
 * out: the rate and the burst, plus at most one batch taken early per process. While Redis cannot
 * be reached, each process limits by itself ({@link RateLimiter}), as a single process does.
 */
export class FleetRateLimiter implements RequestLimiter {
  private readonly leases = new Map<string, Lease>()
  private readonly burst: number
  private readonly batch: number
  private readonly local: RateLimiter

  constructor(
    private readonly redis: Redis,
    /** Key base of the buckets; the tenant is appended. */
    private readonly base: string,
    private readonly ratePerSecond: number,
  ) {
    this.burst = Math.max(1, Math.ceil(ratePerSecond * 2))
    this.batch = Math.max(1, Math.min(this.burst, Math.ceil(ratePerSecond / 4)))
    this.local = new RateLimiter(ratePerSecond, this.burst)
    redis.defineCommand('sbxRateLease', { lua: LEASE, numberOfKeys: 1 })
  }

  async take(tenant: string): Promise<RateVerdict> {
    // Redis away: no request waits on it (the API answers what it can without Redis).
    if (this.redis.status !== 'ready') return this.local.take(tenant)
    const lease = this.leaseOf(tenant)
    for (let tries = 0; tries < 4; tries++) {
      if (lease.tokens >= 1 && performance.now() < lease.until) {
        lease.tokens -= 1
        // Refilled before it runs out, so that requests rarely wait on Redis.
        if (lease.tokens < this.batch / 2 && lease.full) void this.refill(tenant, lease)
        return { ok: true }
      }
      lease.waiting += 1
      let refilled: 'ok' | 'unreachable'
      try {
        refilled = await this.refill(tenant, lease)
      } finally {
        lease.waiting -= 1
      }
      if (refilled === 'unreachable') return this.local.take(tenant)
      // Others waiting on the same lease took its tokens: ask again while the bucket had more.
      if (lease.tokens < 1 && !lease.full) return { ok: false, retryAfterMs: lease.retryAfterMs }
    }
    return { ok: false, retryAfterMs: lease.retryAfterMs }
  }

  private leaseOf(tenant: string): Lease {
    let lease = this.leases.get(tenant)
    if (!lease) {
      if (this.leases.size >= 10_000) this.dropLapsed()
      lease = { tokens: 0, until: 0, retryAfterMs: 1_000, full: true, waiting: 0 }
      this.leases.set(tenant, lease)
    }
    return lease
  }

  /** Takes a batch from the tenant's bucket (one in flight per tenant; callers share it). */
  private refill(tenant: string, lease: Lease): Promise<'ok' | 'unreachable'> {
    if (lease.refill) return lease.refill
    const run = (async (): Promise<'ok' | 'unreachable'> => {
      try {
        // Sent on the next microtask: requests that arrive in this same turn wait for this lease too,
        // and it asks for enough of them all.
        await null
        const want = Math.min(this.burst, Math.max(this.batch, lease.waiting))
        const [granted, retryAfterMs] = (await (
          this.redis as unknown as { sbxRateLease(...args: (string | number)[]): Promise<[number, number]> }
        ).sbxRateLease(`${this.base}${tenant}`, this.ratePerSecond, this.burst, want)) as [number, number]
        const now = performance.now()
        lease.tokens = (now < lease.until ? lease.tokens : 0) + Number(granted)
        lease.until = now + LEASE_MS
        lease.full = Number(granted) >= want
        lease.retryAfterMs = Number(retryAfterMs) || 1_000
        return 'ok'
      } catch {
        return 'unreachable'
      } finally {
        lease.refill = undefined
      }
    })()
    lease.refill = run
    return run
  }

  private dropLapsed(): void {
    const now = performance.now()
    for (const [tenant, lease] of this.leases)
      if (now >= lease.until && !lease.refill) this.leases.delete(tenant)
  }
}
