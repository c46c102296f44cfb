import type { Sandbox, SandboxRef } from '../sandbox/types.js'
import type { PoolCore } from './core.js'
import { withoutRecreateAdvice } from './replacement-reason.js'
import type { Lease, LeaseOutcome, SandboxReplacement, SessionKey } from './types.js'

/** What the pool remembers about a lease it handed out (renewed by its heartbeat). */
export interface LiveLease {
  readonly leaseId: string
  readonly ref: SandboxRef
  readonly slots: readonly string[]
  /** Session hash; absent for an ephemeral sandbox. */
  readonly session?: string
  readonly idleTtlMs: number
  /** The session's idle deadline written when this lease was taken, if it was. */
  readonly idleDeadline?: number
}

/**
 * A lease that ends within this long of the idle deadline it wrote (at most 1 s, and at most 1% of the
 * profile's `idleTtlMs`) leaves that deadline as it is: one script step instead of five on the hot path,
 * and the session's idle time counts from its call's start rather than its end, the difference bounded.
 */
export function idleRefreshSlackMs(idleTtlMs: number): number {
  return Math.min(1_000, idleTtlMs / 100)
}

/** The {@link Lease} given to callers; `release` runs once, later calls return the same promise. */
export class PoolLease implements Lease {
  private released: Promise<void> | undefined
  private markFreed: () => void = () => {}
  readonly freed: Promise<void> = new Promise((resolve) => (this.markFreed = resolve))

  constructor(
    readonly key: SessionKey,
    readonly sandbox: Sandbox,
    readonly hit: boolean,
    readonly live: LiveLease,
    private readonly book: LeaseBook,
    readonly sandboxReplaced?: SandboxReplacement,
  ) {}

  get ref(): SandboxRef {
    return this.live.ref
  }

  release(outcome: LeaseOutcome = 'ok', reason?: string): Promise<void> {
    this.released ??= this.book
      .release(this.live, outcome, reason, () => this.markFreed())
      .finally(() => this.markFreed())
    return this.released
  }

  closedMeanwhile(): Promise<boolean> {
    return this.live.session === undefined ? Promise.resolve(false) : this.book.wasClosed(this.live.ref.id)
  }
}

/** The replacement notice reason of a sandbox lost while leased. */
function lostReason(reason: string | undefined): string {
  const why =
    reason === undefined ? 'it stopped, was removed, or its engine restarted' : withoutRecreateAdvice(reason)
  return `the sandbox was lost while in use: ${why}`
}

/**
 * The leases this process handed out: renews them (the heartbeat), and ends them — keeping a
 * session's binding on `ok`, unbinding and destroying on `lost`, destroying ephemeral sandboxes.
 */
export class LeaseBook {
  private readonly live = new Map<string, LiveLease>()

  constructor(private readonly core: PoolCore) {}

  get size(): number {
    return this.live.size
  }

  /** Records a lease (already stored) and returns the caller's handle on it. */
  open(
    key: SessionKey,
    sandbox: Sandbox,
    hit: boolean,
    live: LiveLease,
    replaced?: SandboxReplacement,
  ): Lease {
    this.live.set(live.leaseId, live)
    return new PoolLease(key, sandbox, hit, live, this, replaced)
  }

  /** Whether a session delete closed this sandbox (recently). */
  wasClosed(refId: string): Promise<boolean> {
    return this.core.store.wasClosed(refId)
  }

  /** Extends every live lease of this process (and the slots they hold). */
  async heartbeat(): Promise<void> {
    if (this.live.size === 0) return
    const leases = [...this.live.values()].map((l) => ({
      refId: l.ref.id,
      leaseId: l.leaseId,
      slots: l.slots,
    }))
    await this.core.store.renewLeases(leases, Date.now() + this.core.opts.leaseTtlMs)
  }

  /** Ends a lease: see the class comment. */
  async release(
    live: LiveLease,
    outcome: LeaseOutcome,
    reason?: string,
    onFreed?: () => void,
  ): Promise<void> {
    const { core } = this
    this.live.delete(live.leaseId)
    core.handles.unuse(live.ref.id)
    if (live.session === undefined) {
      if (outcome === 'ok') core.stats.ephemeralDestroyed++
      await core.destroy(live.ref, live.slots, outcome === 'lost' ? 'lost' : undefined, undefined, onFreed)
      return
    }
    if (outcome === 'ok') {
      const idleDeadline = Date.now() + live.idleTtlMs
      const fresh =
        live.idleDeadline !== undefined &&
        idleDeadline - live.idleDeadline <= idleRefreshSlackMs(live.idleTtlMs)
      if (fresh) await core.store.endLease(live.ref.id, live.leaseId)
      else await core.store.endLease(live.ref.id, live.leaseId, { session: live.session, idleDeadline })
      return
    }
    await core.store.endLease(live.ref.id, live.leaseId)
    // Only if the session still points at this sandbox: a stale 'lost' must not unbind a new one.
    // The session's next call binds a fresh sandbox; the notice tells it the files are gone.
    const note = { at: Date.now(), reason: lostReason(reason) }
    const unbound = await core.store.unbind(live.session, live.ref.id, note)
    await core.destroy(live.ref, live.slots, unbound ? 'lost' : undefined)
  }
}
