import { randomUUID } from 'node:crypto'
import { backoffDelayMs } from './backoff.js'
import type { PoolCore, Target } from './core.js'
import { warmSlots } from './bounds.js'
import { engineLabel } from './binder.js'
import { createLabels, WARM_SESSION } from './keys.js'
import type { ClaimQuota, WarmClaim } from './store/types.js'

type PoolTarget = Pick<Target, 'key' | 'provider' | 'profile' | 'pool'>

/**
 * The warm pools of the (provider, profile) pairs this process knows: unbound sandboxes kept ready
 * (`pool.minIdle` of the profile), claimed atomically from the store and topped up in the
 * background. One process refills a pool at a time (a store lock), so the fleet does not overshoot.
 */
export class WarmPools {
  private readonly known = new Map<string, PoolTarget>()
  private readonly refilling = new Map<string, Promise<void>>()
  private readonly failures = new Map<string, { count: number; retryAt: number }>()

  constructor(private readonly core: PoolCore) {}

  /** Pools seen so far. */
  get pools(): PoolTarget[] {
    return [...this.known.values()]
  }

  /** Registers a pool and starts topping it up to `minIdle` in the background. */
  ensure(t: PoolTarget): void {
    if (!this.known.has(t.pool)) this.known.set(t.pool, t)
    this.refillSoon(t.pool)
  }

  /**
   * Pops a warm sandbox of `t`'s pool, leased under `leaseId` and counted in `quota`'s slot set;
   * expired ones met on the way are destroyed.
   */
  async claim(t: PoolTarget, leaseId: string, quota?: ClaimQuota): Promise<WarmClaim> {
    const { store, opts, stats } = this.core
    const now = Date.now()
    const c = await store.claimWarm(t.pool, { leaseId, expiresAt: now + opts.leaseTtlMs }, now, quota)
    stats.warm.set(t.pool, c.remaining)
    for (const e of c.expired) {
      void this.core.background(`destroying expired warm sandbox ${e.ref.id}`, () =>
        this.core.destroy(e.ref, this.slotNames(t), 'idle'),
      )
    }
    if (t.profile.pool.minIdle > 0) this.ensure(t)
    return c
  }

  /** Destroys warm sandboxes past their TTL and tops pools up. */
  async maintain(now: number): Promise<void> {
    for (const t of this.known.values()) {
      const expired = await this.core.store.takeExpiredWarm(t.pool, now)
      await Promise.all(expired.map((e) => this.core.destroy(e.ref, this.slotNames(t), 'idle')))
      this.refillSoon(t.pool)
    }
  }

  /** Destroys every warm sandbox of the known pools (shutdown with `destroyIdle`). */
  async destroyAll(): Promise<void> {
    for (const t of this.known.values()) {
      const entries = await this.core.store.drainWarm(t.pool)
      this.core.stats.warm.set(t.pool, 0)
      await Promise.all(entries.map((e) => this.core.destroy(e.ref, this.slotNames(t), 'shutdown')))
    }
  }

  /** Resolves when no refill of this process is running. */
  async settled(): Promise<void> {
    while (this.refilling.size > 0) await Promise.all(this.refilling.values())
  }

  private refillSoon(pool: string): void {
    const t = this.known.get(pool)
    if (!t || t.profile.pool.minIdle === 0 || this.core.closed || this.refilling.has(pool)) return
    const failed = this.failures.get(pool)
    if (failed && Date.now() < failed.retryAt) return
    // Debounced: a burst of claims is refilled once, and the create's CPU work (request building,
    // stream setup) stays off the claims' critical path.
    const run = new Promise<void>((resolve) => setTimeout(resolve, this.core.opts.refillDelayMs))
      .then(() => this.core.background(`refilling warm pool ${pool}`, () => this.refill(t)))
      .finally(() => this.refilling.delete(pool))
    this.refilling.set(pool, run)
  }

  private async refill(t: PoolTarget): Promise<void> {
    const { store, opts } = this.core
    const lock = `refill:${t.pool}`
    const token = `${opts.instanceId}:${randomUUID()}`
    if (!(await store.tryLock(lock, token, opts.lockTtlMs))) return
    const renew = setInterval(() => {
      void this.core.background('renewing a refill lock', () => store.renewLock(lock, token, opts.lockTtlMs))
    }, opts.lockTtlMs / 3)
    renew.unref()
    try {
      while (!this.core.closed) {
        const size = await store.warmSize(t.pool)
        this.core.stats.warm.set(t.pool, size)
        const need = Math.min(t.profile.pool.minIdle - size, opts.refillConcurrency)
        if (need <= 0) break
        const results = await Promise.allSettled(Array.from({ length: need }, () => this.createOne(t)))
        const failed = results.find((r): r is PromiseRejectedResult => r.status === 'rejected')
        if (failed) {
          const count = (this.failures.get(t.pool)?.count ?? 0) + 1
          const retryAt = Date.now() + backoffDelayMs(count - 1, opts.createBackoff)
          this.failures.set(t.pool, { count, retryAt })
          throw failed.reason
        }
        this.failures.delete(t.pool)
        // The profile's or provider's cap is reached: bound sandboxes leave no room for warm ones.
        if (results.every((r) => r.status === 'fulfilled' && !r.value)) break
      }
    } finally {
      clearInterval(renew)
      await store.unlock(lock, token)
    }
  }

  /** The slot sets a warm sandbox of `t`'s pool is counted in (its profile's and its provider's). */
  private slotNames(t: PoolTarget): string[] {
    return warmSlots(this.core, t).map((c) => c.name)
  }

  /** Creates one warm sandbox; false when the pool has no room. */
  private async createOne(t: PoolTarget): Promise<boolean> {
    const { store, opts, stats } = this.core
    const slots = this.slotNames(t)
    const token = `r:${randomUUID()}`
    const now = Date.now()
    const room = await store.reserveSlots(
      warmSlots(this.core, t),
      token,
      now + opts.acquireTimeoutMs + opts.lockTtlMs,
      now,
    )
    if (!room.ok) return false
    try {
      const signal = AbortSignal.any([this.core.shutdownSignal, AbortSignal.timeout(opts.acquireTimeoutMs)])
      const labels = createLabels({
        scope: opts.scope,
        instanceId: opts.instanceId,
        profile: t.profile.name,
        session: WARM_SESSION,
        now,
        ...engineLabel(this.core, t.key.providerId),
      })
      const sandbox = await this.core.create(t, labels, signal)
      this.core.handles.put(sandbox)
      try {
        const createdAt = Date.now()
        const expiresAt = createdAt + t.profile.idleTtlMs
        await store.moveSlot(slots, token, sandbox.ref.id, expiresAt)
        stats.warm.set(t.pool, await store.pushWarm(t.pool, { ref: sandbox.ref, createdAt, expiresAt }))
      } catch (err) {
        await this.core.destroy(sandbox.ref, slots)
        throw err
      }
      return true
    } finally {
      await store.releaseSlots(slots, token)
    }
  }
}
