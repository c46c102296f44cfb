import { performance } from 'node:perf_hooks'
import { AppError } from '../errors.js'
import { BoundReached } from '../sessions/bounds.js'
import type { AcquireOptions, Lease, SessionKey, SessionPool, SessionState } from '../sessions/types.js'
import type { CircuitBreaker } from './circuit-breaker.js'
import type { RouteCandidate, RoutePolicies, RoutePolicy } from './policies.js'

/** Which candidate of a policy ran a call, and why the ones before it did not. */
export interface PolicyRoute {
  readonly policy: string
  readonly providerId: string
  readonly profile: string
  /** Whether the session was already pinned to this candidate (its files live there). */
  readonly pinned: boolean
  /** Candidates tried or skipped before this one, each with the reason. */
  readonly skipped: readonly {
    readonly providerId: string
    readonly profile: string
    readonly reason: string
  }[]
}

/** A lease taken through a policy carries the route it took. */
export type PolicyLease = Lease & { readonly route?: PolicyRoute }

type Candidate = RoutePolicy['candidates'][number]

/** Whether the failure of a create on one candidate lets the policy try the next. */
function fallsOver(mode: RoutePolicy['mode'], err: unknown): boolean {
  if (!(err instanceof AppError)) return mode !== 'spillover'
  // The tenant's own quota counts every provider: another candidate would refuse too.
  if (err instanceof BoundReached) return err.bound !== 'tenant'
  // A provider's own concurrency quota: a 429 (the Daytona provider reports it inside a create failure).
  if (err.code === 'RATE_LIMITED' || /\b429\b/.test(err.message)) return true
  if (mode === 'spillover') return false
  return ['SANDBOX_CREATE_FAILED', 'UNAVAILABLE', 'ACQUIRE_TIMEOUT', 'SANDBOX_LOST'].includes(err.code)
}

/** Whether a failure says something about the provider's health (our own bounds do not). */
function countsAgainstProvider(err: unknown): boolean {
  return !(err instanceof BoundReached) && !(err instanceof AppError && err.code === 'QUOTA_EXCEEDED')
}

const message = (err: unknown): string => (err instanceof Error ? err.message : String(err))

/**
 * A {@link SessionPool} that also takes keys whose `providerId` names a routing policy: a new
 * session (or an ephemeral call) goes to the first candidate, in the policy's order, that can take
 * it; a session already bound to a candidate stays there (pinned — its files live there), and a
 * pinned candidate that fails is the call's error, never a silent move. Keys naming a provider pass
 * straight through.
 */
export class PolicyPool implements SessionPool {
  /** Create latency per candidate measured on this process, for `fastest` (ms, moving average). */
  private readonly latencyMs = new Map<string, number>()

  constructor(
    private readonly pool: SessionPool,
    private readonly policies: RoutePolicies,
    private readonly breaker: CircuitBreaker,
    private readonly random: () => number = Math.random,
  ) {}

  private policyOf(key: SessionKey): RoutePolicy | undefined {
    return this.policies.get(key.providerId)
  }

  private keysOf(key: SessionKey, policy: RoutePolicy): { candidate: Candidate; key: SessionKey }[] {
    return this.policies.candidatesFor(policy, key.profile).map((candidate) => ({
      candidate,
      key: { ...key, providerId: candidate.provider, profile: candidate.profile },
    }))
  }

  /** The candidate a session is bound to (or was, before its sandbox was replaced), if any. */
  private async pinned(key: SessionKey, policy: RoutePolicy) {
    if (key.sessionId === undefined) return undefined
    for (const c of this.keysOf(key, policy)) {
      const s = await this.pool.state(c.key)
      if (s.sandboxId !== undefined || s.sandboxReplaced !== undefined) return c
    }
    return undefined
  }

  /** The candidates in the order the policy's mode tries them for a new session. */
  private ordered(candidates: { candidate: Candidate; key: SessionKey }[], mode: RoutePolicy['mode']) {
    const list = [...candidates]
    switch (mode) {
      case 'failover':
      case 'spillover':
        return list
      case 'cheapest':
        return list.sort(
          (a, b) => (a.candidate.pricePerSecond ?? Infinity) - (b.candidate.pricePerSecond ?? Infinity),
        )
      case 'fastest':
        // Unmeasured candidates first, so each gets measured once.
        return list.sort((a, b) => (this.latency(a.candidate) ?? -1) - (this.latency(b.candidate) ?? -1))
      case 'weighted': {
        const out: typeof list = []
        while (list.length > 0) {
          const total = list.reduce((s, c) => s + c.candidate.weight, 0)
          let r = this.random() * total
          let i = 0
          for (; i < list.length - 1; i++) {
            r -= list[i]?.candidate.weight ?? 0
            if (r < 0) break
          }
          out.push(...list.splice(i, 1))
        }
        return out
      }
    }
  }

  private latency(c: RouteCandidate): number | undefined {
    return this.latencyMs.get(`${c.provider}/${c.profile}`)
  }

  private observe(c: RouteCandidate, ms: number): void {
    const id = `${c.provider}/${c.profile}`
    const prev = this.latencyMs.get(id)
    this.latencyMs.set(id, prev === undefined ? ms : prev * 0.8 + ms * 0.2)
  }

  async acquire(key: SessionKey, opts?: AcquireOptions): Promise<PolicyLease> {
    const policy = this.policyOf(key)
    if (!policy) return this.pool.acquire(key, opts)
    const pin = await this.pinned(key, policy)
    if (pin) {
      try {
        const lease = await this.pool.acquire(pin.key, opts)
        return withRoute(lease, policy, pin.candidate, true, [])
      } catch (err) {
        if (!(err instanceof AppError)) throw err
        throw new AppError(
          err.code,
          `${err.message} (session '${key.sessionId}' is pinned by routing policy '${policy.name}' to ` +
            `${pin.candidate.provider}/${pin.candidate.profile}, where its files live; it does not move to ` +
            'another candidate by itself: retry later, or delete the session to start over elsewhere)',
          { retryable: err.retryable, cause: err },
        )
      }
    }
    const skipped: { providerId: string; profile: string; reason: string }[] = []
    let last: unknown
    const order = this.ordered(this.keysOf(key, policy), policy.mode)
    for (const [i, { candidate, key: ck }] of order.entries()) {
      const at = { providerId: candidate.provider, profile: candidate.profile }
      if (!(await this.breaker.allow(candidate.provider))) {
        const s = await this.breaker.state(candidate.provider)
        skipped.push({
          ...at,
          reason: `circuit open after ${s.failures} failed create(s)${s.lastError ? ` (last: ${s.lastError})` : ''}`,
        })
        continue
      }
      const t0 = performance.now()
      let lease: Lease
      try {
        // A candidate with others after it gets one create: failing over beats retrying here.
        lease = await this.pool.acquire(ck, i < order.length - 1 ? { ...opts, createAttempts: 1 } : opts)
      } catch (err) {
        if (opts?.signal?.aborted) throw err
        last = err
        // The breaker tells its transitions itself (lifecycle events, logs).
        if (countsAgainstProvider(err)) await this.breaker.failure(candidate.provider, message(err))
        if (!fallsOver(policy.mode, err)) throw err
        skipped.push({ ...at, reason: message(err) })
        continue
      }
      if (!lease.hit) this.observe(candidate, performance.now() - t0)
      await this.breaker.success(candidate.provider)
      const raced = await this.lostPinRace(key, policy, ck, lease)
      if (raced) return raced
      return withRoute(lease, policy, candidate, false, skipped)
    }
    const why = skipped.map((s) => `${s.providerId}/${s.profile}: ${s.reason}`).join('; ')
    const code = last instanceof AppError ? last.code : 'SANDBOX_CREATE_FAILED'
    throw new AppError(
      code,
      `routing policy '${policy.name}' (${policy.mode}): no candidate could take the call — ${why}`,
      { retryable: true, ...(last ? { cause: last } : {}) },
    )
  }

  /**
   * Two first calls of one session may bind two candidates at once; the one earliest in the policy's
   * list wins and the other gives its fresh sandbox back, so the session has one home.
   */
  private async lostPinRace(
    key: SessionKey,
    policy: RoutePolicy,
    mine: SessionKey,
    lease: Lease,
  ): Promise<PolicyLease | undefined> {
    if (key.sessionId === undefined) return undefined
    const winner = await this.pinned(key, policy)
    if (!winner || (winner.key.providerId === mine.providerId && winner.key.profile === mine.profile))
      return undefined
    await lease.release()
    await this.pool.close(mine)
    return withRoute(await this.pool.acquire(winner.key), policy, winner.candidate, true, [])
  }

  async close(key: SessionKey): Promise<void> {
    const policy = this.policyOf(key)
    if (!policy) return this.pool.close(key)
    for (const c of this.keysOf(key, policy)) await this.pool.close(c.key)
  }

  async admit(key: SessionKey): Promise<void> {
    const policy = this.policyOf(key)
    if (!policy) return this.pool.admit(key)
    const pin = await this.pinned(key, policy)
    if (pin) return this.pool.admit(pin.key)
    let first: unknown
    for (const c of this.keysOf(key, policy)) {
      try {
        return await this.pool.admit(c.key)
      } catch (err) {
        first ??= err
        if (err instanceof BoundReached && err.bound === 'tenant') throw err
      }
    }
    throw first
  }

  async state(key: SessionKey): Promise<SessionState> {
    const policy = this.policyOf(key)
    if (!policy) return this.pool.state(key)
    const pin = await this.pinned(key, policy)
    return pin ? this.pool.state(pin.key) : {}
  }

  async acknowledge(key: SessionKey) {
    const policy = this.policyOf(key)
    if (!policy) return this.pool.acknowledge(key)
    const pin = await this.pinned(key, policy)
    return pin ? this.pool.acknowledge(pin.key) : undefined
  }

  reap(): Promise<number> {
    return this.pool.reap()
  }

  shutdown(opts?: { destroyIdle?: boolean }): Promise<void> {
    return this.pool.shutdown(opts)
  }

  stats() {
    return this.pool.stats()
  }
}

function withRoute(
  lease: Lease,
  policy: RoutePolicy,
  c: Candidate,
  pinned: boolean,
  skipped: PolicyRoute['skipped'],
): PolicyLease {
  const route: PolicyRoute = {
    policy: policy.name,
    providerId: c.provider,
    profile: c.profile,
    pinned,
    skipped,
  }
  return {
    key: lease.key,
    sandbox: lease.sandbox,
    get ref() {
      return lease.ref
    },
    hit: lease.hit,
    ...(lease.sandboxReplaced ? { sandboxReplaced: lease.sandboxReplaced } : {}),
    ...(lease.freed ? { freed: lease.freed } : {}),
    release: (outcome, reason) => lease.release(outcome, reason),
    closedMeanwhile: () => lease.closedMeanwhile(),
    route,
  }
}
