import type { Redis } from 'ioredis'
import { z } from 'zod'

/**
 * Circuit breaking per provider: after `failureThreshold` consecutive failed creates, a provider's
 * circuit opens for `cooldownMs`; routing policies skip it meanwhile. After the cool-down it is
 * half-open: one call (fleet-wide) probes it; a success closes the circuit, a failure opens it again.
 * A route naming one provider directly is not refused by an open circuit (it has no alternative):
 * the circuit only steers policies.
 */

/** Config `routing.circuit`. */
export const CircuitOptionsSchema = z
  .object({
    /** Consecutive failed creates that open a provider's circuit. @default 5 */
    failureThreshold: z.number().int().positive().default(5),
    /** How long an open circuit stays open before one probe may try again (ms). @default 30000 */
    cooldownMs: z.number().int().positive().default(30_000),
  })
  .strict()
export type CircuitOptions = z.output<typeof CircuitOptionsSchema>

/** What `/v1/providers` shows of a provider's circuit. */
export interface CircuitState {
  readonly state: 'closed' | 'open' | 'half-open'
  /** Consecutive failures counted so far. */
  readonly failures: number
  /** While open: when a probe may try again (epoch ms). */
  readonly openUntil?: number
  /** The last failure's message. */
  readonly lastError?: string
}

/** The breaker the routing policies consult; shared by the fleet through Redis, or in-process. */
export interface CircuitBreaker {
  /** Whether a call may try `provider` now (an open circuit: no; half-open: one caller, yes). */
  allow(provider: string): Promise<boolean>
  /** A create on `provider` succeeded: its circuit closes. */
  success(provider: string): Promise<void>
  /** A create on `provider` failed (not a bound of ours): counts toward opening its circuit. */
  failure(provider: string, reason: string): Promise<void>
  /** The circuit of `provider` as it stands. */
  state(provider: string): Promise<CircuitState>
}

interface Entry {
  failures: number
  openUntil?: number
  probing?: number
  lastError?: string
}

function view(e: Entry | undefined, now: number): CircuitState {
  if (!e) return { state: 'closed', failures: 0 }
  const base = { failures: e.failures, ...(e.lastError ? { lastError: e.lastError } : {}) }
  if (e.openUntil === undefined) return { state: 'closed', ...base }
  return now < e.openUntil
    ? { state: 'open', ...base, openUntil: e.openUntil }
    : { state: 'half-open', ...base, openUntil: e.openUntil }
}

/** The breaker of one process (embedded mode). */
export class MemoryCircuitBreaker implements CircuitBreaker {
  private readonly entries = new Map<string, Entry>()

  constructor(
    private readonly opts: CircuitOptions,
    private readonly now: () => number = Date.now,
  ) {}

  allow(provider: string): Promise<boolean> {
    const e = this.entries.get(provider)
    const t = this.now()
    if (!e || e.openUntil === undefined) return Promise.resolve(true)
    if (t < e.openUntil) return Promise.resolve(false)
    // Half-open: one probe per cool-down.
    if (e.probing !== undefined && t < e.probing + this.opts.cooldownMs) return Promise.resolve(false)
    e.probing = t
    return Promise.resolve(true)
  }

  success(provider: string): Promise<void> {
    this.entries.delete(provider)
    return Promise.resolve()
  }

  failure(provider: string, reason: string): Promise<void> {
    const e = this.entries.get(provider) ?? { failures: 0 }
    e.failures++
    e.lastError = reason
    const halfOpen = e.openUntil !== undefined && this.now() >= e.openUntil
    if (e.failures >= this.opts.failureThreshold || halfOpen) {
      e.openUntil = this.now() + this.opts.cooldownMs
      delete e.probing
    }
    this.entries.set(provider, e)
    return Promise.resolve()
  }

  state(provider: string): Promise<CircuitState> {
    return Promise.resolve(view(this.entries.get(provider), this.now()))
  }
}

/**
 * failure(key, now, threshold, cooldown, reason): counts one failure; opens (or re-opens, when it was
 * half-open) the circuit. The hash expires a while after the last change, so a provider that failed
 * once long ago starts from zero.
 */
const FAILURE_LUA = `
local failures = redis.call('HINCRBY', KEYS[1], 'failures', 1)
redis.call('HSET', KEYS[1], 'lastError', ARGV[4])
local openUntil = tonumber(redis.call('HGET', KEYS[1], 'openUntil') or '')
local now = tonumber(ARGV[1])
if failures >= tonumber(ARGV[2]) or (openUntil and now >= openUntil) then
  redis.call('HSET', KEYS[1], 'openUntil', now + tonumber(ARGV[3]))
  redis.call('HDEL', KEYS[1], 'probing')
end
redis.call('PEXPIRE', KEYS[1], 10 * tonumber(ARGV[3]))
return failures
`

/** allow(key, now, cooldown): 1 when a call may try the provider; a half-open circuit lets one through. */
const ALLOW_LUA = `
local openUntil = tonumber(redis.call('HGET', KEYS[1], 'openUntil') or '')
if not openUntil then return 1 end
local now = tonumber(ARGV[1])
if now < openUntil then return 0 end
local probing = tonumber(redis.call('HGET', KEYS[1], 'probing') or '')
if probing and now < probing + tonumber(ARGV[2]) then return 0 end
redis.call('HSET', KEYS[1], 'probing', now)
return 1
`

/** The fleet's breaker: one Redis hash per provider, `<prefix>:circuit:<provider>`. */
export class RedisCircuitBreaker implements CircuitBreaker {
  constructor(
    private readonly redis: Redis,
    private readonly prefix: string,
    private readonly opts: CircuitOptions,
  ) {}

  private key(provider: string): string {
    return `${this.prefix}:circuit:${provider}`
  }

  async allow(provider: string): Promise<boolean> {
    const r = await this.redis.eval(ALLOW_LUA, 1, this.key(provider), Date.now(), this.opts.cooldownMs)
    return r === 1
  }

  async success(provider: string): Promise<void> {
    await this.redis.del(this.key(provider))
  }

  async failure(provider: string, reason: string): Promise<void> {
    await this.redis.eval(
      FAILURE_LUA,
      1,
      this.key(provider),
      Date.now(),
      this.opts.failureThreshold,
      this.opts.cooldownMs,
      reason.slice(0, 500),
    )
  }

  async state(provider: string): Promise<CircuitState> {
    const h = await this.redis.hgetall(this.key(provider))
    if (!h['failures']) return { state: 'closed', failures: 0 }
    const e: Entry = { failures: Number(h['failures']) }
    if (h['openUntil']) e.openUntil = Number(h['openUntil'])
    if (h['lastError']) e.lastError = h['lastError']
    return view(e, Date.now())
  }
}
