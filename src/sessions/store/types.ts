import type { SandboxRef } from '../../sandbox/types.js'
import type { SandboxReplacement } from '../types.js'

/** A session's sandbox, as stored. Any worker of the fleet reconnects by `ref`. */
export interface BindingRecord {
  readonly ref: SandboxRef
  readonly tenant: string
  /** Slot sets the sandbox occupies (its tenant's and its pool's); freed when it is destroyed. */
  readonly slots: readonly string[]
  /** When the session was bound (ms since epoch). */
  readonly boundAt: number
}

/**
 * When and why a session's sandbox is being replaced; the store completes it into a
 * {@link SandboxReplacement} with the id of the sandbox it unbinds.
 */
export interface ReplacementNote {
  readonly at: number
  readonly reason: string
}

/** An unbound sandbox waiting in a warm pool. */
export interface WarmEntry {
  readonly ref: SandboxRef
  readonly createdAt: number
  /** Destroyed when still unclaimed at this time (ms since epoch). */
  readonly expiresAt: number
}

/** A lease to record: the holder renews it before `expiresAt` or it counts as dead. */
export interface LeaseSpec {
  readonly leaseId: string
  readonly expiresAt: number
}

/** One live lease of this process, renewed by the heartbeat. */
export interface LeaseRenewal {
  readonly refId: string
  readonly leaseId: string
  /** Slot sets whose entry for `refId` must outlive the lease. */
  readonly slots: readonly string[]
}

/** On lease end, what to refresh for a still-bound session. */
export interface LeaseTouch {
  readonly session: string
  /** New idle deadline of the binding; never moves backwards. */
  readonly idleDeadline: number
}

/** A slot set and its capacity, for {@link SessionStore.reserveSlots}. */
export interface SlotClaim {
  readonly name: string
  readonly max: number
}

/** Result of {@link SessionStore.reserveSlots}. */
export type SlotReservation = { ok: true } | { ok: false; full: string; count: number; max: number }

/** Result of {@link SessionStore.claimWarm}. */
export interface WarmClaim {
  /** The claimed sandbox, now leased and unlisted; absent when the pool was empty (or the quota full). */
  readonly entry?: WarmEntry
  /** Entries popped past their expiry on the way: the caller destroys them. */
  readonly expired: readonly WarmEntry[]
  /** Entries left in the warm list. */
  readonly remaining: number
  /** Set when the quota slot set was full: nothing was claimed. */
  readonly quotaFull?: { readonly count: number; readonly max: number }
}

/** A slot set a claimed sandbox must also fit in (the tenant quota), and its entry's expiry. */
export interface ClaimQuota {
  readonly slot: SlotClaim
  readonly expiresAt: number
}

/** The bind lock of a session: taken by {@link SessionStore.useOrLock}, released by {@link SessionStore.bind}. */
export interface BindLock {
  readonly name: string
  /** Identifies the holder: only it can renew or release the lock. */
  readonly token: string
  readonly ttlMs: number
}

/**
 * Result of {@link SessionStore.useOrLock}: the binding (now leased) and the session's unacknowledged
 * replacement notice, or the lock outcome.
 */
export type UseOrLockResult =
  | { readonly binding: BindingRecord; readonly replaced?: SandboxReplacement }
  | { readonly lock: 'locked' | 'busy' }

/**
 * Shared state of the session pool: bindings, leases, warm lists, locks and slot sets. Every
 * method is atomic on its own, so pools in many processes can share one store. Times are ms since
 * the epoch as seen by the caller (fleet clocks are assumed to agree within seconds).
 *
 * Slot sets count sandboxes for quotas: each member (a sandbox id, or a reservation token while a
 * create is in flight) carries an expiry, so entries left behind by a crashed worker stop counting.
 */
export interface SessionStore {
  /** Atomically: returns the binding, pushes its idle deadline forward, leases its sandbox and extends its slots. */
  useBinding(session: string, lease: LeaseSpec, idleDeadline: number): Promise<BindingRecord | undefined>
  /** The binding, without side effects. */
  getBinding(session: string): Promise<BindingRecord | undefined>
  /**
   * Atomically: like {@link useBinding} when the session is bound; otherwise takes `lock` ('locked')
   * unless another binder holds it ('busy').
   */
  useOrLock(session: string, lease: LeaseSpec, idleDeadline: number, lock: BindLock): Promise<UseOrLockResult>
  /**
   * Stores a binding unless the session already has one (then returns false); with `unlock`, also
   * releases the bind lock in the same step.
   */
  bind(
    session: string,
    binding: BindingRecord,
    idleDeadline: number,
    unlock?: Pick<BindLock, 'name' | 'token'>,
  ): Promise<boolean>
  /**
   * Removes the binding (only if it still points at `refId`, when given) and returns what it was;
   * with `replaced`, records that notice for the session in the same step (only if it unbound).
   */
  unbind(session: string, refId?: string, replaced?: ReplacementNote): Promise<BindingRecord | undefined>
  /**
   * A session is deleted: removes its binding and its replacement notice, and remembers for a while
   * (an hour) that its sandbox was closed, so a command it kills can say why ({@link wasClosed}).
   */
  closeSession(session: string): Promise<BindingRecord | undefined>
  /** Whether {@link closeSession} closed this sandbox within the last hour. */
  wasClosed(refId: string): Promise<boolean>
  /** The session's unacknowledged replacement notice. */
  replacement(session: string): Promise<SandboxReplacement | undefined>
  /** Clears the session's replacement notice and returns it. */
  acknowledge(session: string): Promise<SandboxReplacement | undefined>
  /**
   * Atomically unbinds a session whose idle deadline passed and whose sandbox has no live lease;
   * with `replaced`, records that notice for the session in the same step.
   */
  evictIfIdle(session: string, now: number, replaced?: ReplacementNote): Promise<BindingRecord | undefined>
  /** Sessions whose idle deadline is at or before `now` (candidates for {@link evictIfIdle}). */
  idleSessions(now: number, limit: number): Promise<string[]>

  /** Records a lease on a sandbox. */
  addLease(refId: string, lease: LeaseSpec): Promise<void>
  /** Extends live leases (ended ones stay ended) and the slots they hold. */
  renewLeases(leases: readonly LeaseRenewal[], expiresAt: number): Promise<void>
  /** Ends a lease; with `touch`, also pushes the session's idle deadline if it is still bound to `refId`. */
  endLease(refId: string, leaseId: string, touch?: LeaseTouch): Promise<void>

  /** Appends a sandbox to a warm list; returns the list's new length. */
  pushWarm(pool: string, entry: WarmEntry): Promise<number>
  /**
   * Atomically pops the oldest unexpired entry and leases it (expired ones met on the way are
   * returned). With `quota`, first checks the slot set has room and adds the claimed sandbox to it.
   */
  claimWarm(pool: string, lease: LeaseSpec, now: number, quota?: ClaimQuota): Promise<WarmClaim>
  /** Removes and returns the entries past their expiry. */
  takeExpiredWarm(pool: string, now: number): Promise<WarmEntry[]>
  /** Removes and returns every entry. */
  drainWarm(pool: string): Promise<WarmEntry[]>
  /** Length of a warm list. */
  warmSize(pool: string): Promise<number>

  /** Which of these sandboxes are bound, warm or leased (live lease at `now`). */
  inUse(refIds: readonly string[], now: number): Promise<Set<string>>
  /** Drops everything kept about a destroyed sandbox: leases, ownership, slot entries. */
  forget(refId: string, slots: readonly string[]): Promise<void>

  /** Takes a lock unless someone else holds it. */
  tryLock(name: string, token: string, ttlMs: number): Promise<boolean>
  /** Extends a lock still held by `token`. */
  renewLock(name: string, token: string, ttlMs: number): Promise<boolean>
  /** Releases a lock still held by `token`. */
  unlock(name: string, token: string): Promise<boolean>

  /**
   * Atomically adds `member` to every slot set unless one is full (expired entries dropped first);
   * a member already present counts as reserved.
   */
  reserveSlots(
    claims: readonly SlotClaim[],
    member: string,
    expiresAt: number,
    now: number,
  ): Promise<SlotReservation>
  /** Replaces `from` by `to` in the slot sets (a reservation becomes a sandbox id). */
  moveSlot(names: readonly string[], from: string, to: string, expiresAt: number): Promise<void>
  /** Removes `member` from the slot sets. */
  releaseSlots(names: readonly string[], member: string): Promise<void>
  /** Live entries of a slot set. */
  slotCount(name: string, now: number): Promise<number>

  /** Releases connections (the in-memory store: nothing). */
  close(): Promise<void>
}
