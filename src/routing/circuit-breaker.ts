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

/**
 * A change of a provider's circuit, told once by the breaker (of the fleet: by the process whose
 * call made it, decided atomically in Redis). `open`: failed creates reached the threshold (or a
 * half-open probe failed); `half-open`: the cool-down is over and a first probe is let through;
 * `closed`: a create succeeded on an open or half-open provider.
 */
export interface CircuitTransition {
  readonly provider: string
  readonly from: CircuitState['state']
  readonly to: CircuitState['state']
  /** Consecutive failures counted (0 once closed). */
  readonly failures: number
  /** Why, in words (the last failure's message for an opening). */
  readonly reason: string
  /** When opened: when a probe may try again (epoch ms). */
  readonly openUntil?: number
}

/** Told of every circuit transition; must not throw (a throw is ignored). */
export type CircuitTransitionListener = (transition: CircuitTransition) => void

function tell(listener: CircuitTransitionListener | undefined, t: CircuitTransition): void {
  try {
    listener?.(t)
  } catch {
    // Observers cannot break routing.
  }
}

function opened(
  provider: string,
  from: 'closed' | 'half-open',
  failures: number,
  reason: string,
  openUntil: number,
): CircuitTransition {
  const why =
    from === 'half-open'
      ? `the half-open probe failed: ${reason}`
      : `${failures} consecutive failed create(s); last: ${reason}`
  return { provider, from, to: 'open', failures, reason: why, openUntil }
}

const halfOpened = (provider: string, failures: number, cooldownMs: number): CircuitTransition => ({
  provider,
  from: 'open',
  to: 'half-open',
  failures,
  reason: `cool-down of ${cooldownMs} ms over: one probe may try the provider`,
})

const closedAgain = (provider: string, from: 'open' | 'half-open'): CircuitTransition => ({
  provider,
  from,
  to: 'closed',
  failures: 0,
  reason: 'a create succeeded',
})

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
    private readonly onTransition?: CircuitTransitionListener,
  ) {}

  allow(provider: string): Promise<boolean> {
    const e = this.entries.get(provider)
    const t = this.now()
    if (!e || e.openUntil === undefined) return Promise.resolve(true)
    if (t < e.openUntil) return Promise.resolve(false)
    // Half-open: one probe per cool-down.
    if (e.probing !== undefined && t < e.probing + this.opts.cooldownMs) return Promise.resolve(false)
    const first = e.probing === undefined
    e.probing = t
    if (first) tell(this.onTransition, halfOpened(provider, e.failures, this.opts.cooldownMs))
    return Promise.resolve(true)
  }

  success(provider: string): Promise<void> {
    const e = this.entries.get(provider)
    this.entries.delete(provider)
    if (e?.openUntil !== undefined)
      tell(this.onTransition, closedAgain(provider, this.now() < e.openUntil ? 'open' : 'half-open'))
    return Promise.resolve()
  }

  failure(provider: string, reason: string): Promise<void> {
    const e = this.entries.get(provider) ?? { failures: 0 }
    e.failures++
    e.lastError = reason
    const t = this.now()
    const was = e.openUntil === undefined ? 'closed' : t < e.openUntil ? 'open' : 'half-open'
    if (e.failures >= this.opts.failureThreshold || was === 'half-open') {
      e.openUntil = t + this.opts.cooldownMs
      delete e.probing
      if (was !== 'open') tell(this.onTransition, opened(provider, was, e.failures, reason, e.openUntil))
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
 * once long ago starts from zero. Returns { failures, transition, openUntil }: transition 1 when this
 * call opened a closed circuit, 2 when it re-opened a half-open one, 0 otherwise (atomic, so the
 * fleet tells each transition once).
 */
const FAILURE_LUA = `
local failures = redis.call('HINCRBY', KEYS[1], 'failures', 1)
redis.call('HSET', KEYS[1], 'lastError', ARGV[4])
local openUntil = tonumber(redis.call('HGET', KEYS[1], 'openUntil') or '')
local now = tonumber(ARGV[1])
local transition = 0
local untilNow = 0
if failures >= tonumber(ARGV[2]) or (openUntil and now >= openUntil) then
  if not openUntil then transition = 1 elseif now >= openUntil then transition = 2 end
  untilNow = now + tonumber(ARGV[3])
  redis.call('HSET', KEYS[1], 'openUntil', untilNow)
  redis.call('HDEL', KEYS[1], 'probing')
end
redis.call('PEXPIRE', KEYS[1], 10 * tonumber(ARGV[3]))
return { failures, transition, untilNow }
`

/**
 * allow(key, now, cooldown): 1 when a call may try the provider; a half-open circuit lets one
 * through: 2 for its first probe (the half-open transition), 1 for a later one.
 */
const ALLOW_LUA = `
local openUntil = tonumber(redis.call('HGET', KEYS[1], 'openUntil') or '')
if not openUntil then return 1 end
local now = tonumber(ARGV[1])
if now < openUntil then return 0 end
local probing = tonumber(redis.call('HGET', KEYS[1], 'probing') or '')
if probing and now < probing + tonumber(ARGV[2]) then return 0 end
redis.call('HSET', KEYS[1], 'probing', now)
if probing then return 1 end
return { 2, tonumber(redis.call('HGET', KEYS[1], 'failures') or '0') }
`

/** success(key, now): closes the circuit; returns 0 (it was closed), 1 (open) or 2 (half-open). */
const SUCCESS_LUA = `
local openUntil = tonumber(redis.call('HGET', KEYS[1], 'openUntil') or '')
redis.call('DEL', KEYS[1])
if not openUntil then return 0 end
if tonumber(ARGV[1]) < openUntil then return 1 end
return 2
`

/** The fleet's breaker: one Redis hash per provider, `<prefix>:circuit:<provider>`. */
export class RedisCircuitBreaker implements CircuitBreaker {
  constructor(
    private readonly redis: Redis,
    private readonly prefix: string,
    private readonly opts: CircuitOptions,
    private readonly onTransition?: CircuitTransitionListener,
  ) {}

  private key(provider: string): string {
    return `${this.prefix}:circuit:${provider}`
  }

  async allow(provider: string): Promise<boolean> {
    const r = await this.redis.eval(ALLOW_LUA, 1, this.key(provider), Date.now(), this.opts.cooldownMs)
    if (Array.isArray(r)) {
      tell(this.onTransition, halfOpened(provider, Number(r[1]), this.opts.cooldownMs))
      return true
    }
    return r === 1
  }

  async success(provider: string): Promise<void> {
    const r = await this.redis.eval(SUCCESS_LUA, 1, this.key(provider), Date.now())
    if (r === 1 || r === 2) tell(this.onTransition, closedAgain(provider, r === 1 ? 'open' : 'half-open'))
  }

  async failure(provider: string, reason: string): Promise<void> {
    const short = reason.slice(0, 500)
    const r = (await this.redis.eval(
      FAILURE_LUA,
      1,
      this.key(provider),
      Date.now(),
      this.opts.failureThreshold,
      this.opts.cooldownMs,
      short,
    )) as [number, number, number]
    const [failures, transition, openUntil] = r.map(Number) as [number, number, number]
    if (transition === 1 || transition === 2)
      tell(
        this.onTransition,
        opened(provider, transition === 1 ? 'closed' : 'half-open', failures, short, openUntil),
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
