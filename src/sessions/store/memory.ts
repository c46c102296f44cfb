import type {
  BindingRecord,
  BindLock,
  ClaimQuota,
  LeaseRenewal,
  LeaseSpec,
  LeaseTouch,
  ReplacementNote,
  SessionStore,
  SlotClaim,
  SlotReservation,
  UseOrLockResult,
  WarmClaim,
  WarmEntry,
} from './types.js'
import type { SandboxReplacement } from '../types.js'

/** How long a closed sandbox is remembered for {@link MemorySessionStore.wasClosed} (ms). */
const CLOSED_MEMORY_MS = 3_600_000

type Owner = { kind: 'bound'; session: string } | { kind: 'warm'; pool: string }

/**
 * The single-process {@link SessionStore} (embedded mode, no Redis). Same semantics as the Redis
 * store; atomicity comes from running each method without an `await` in between.
 */
export class MemorySessionStore implements SessionStore {
  private readonly bindings = new Map<string, BindingRecord>()
  private readonly idle = new Map<string, number>()
  private readonly owners = new Map<string, Owner>()
  private readonly leases = new Map<string, Map<string, number>>()
  private readonly warm = new Map<string, WarmEntry[]>()
  private readonly locks = new Map<string, { token: string; expiresAt: number }>()
  private readonly slots = new Map<string, Map<string, number>>()
  private readonly replaced = new Map<string, SandboxReplacement>()
  private readonly closed = new Map<string, number>()

  async useBinding(
    session: string,
    lease: LeaseSpec,
    idleDeadline: number,
  ): Promise<BindingRecord | undefined> {
    const b = this.bindings.get(session)
    if (!b) return undefined
    this.pushIdle(session, idleDeadline)
    this.leaseSet(b.ref.id).set(lease.leaseId, lease.expiresAt)
    this.extendSlots(b.slots, b.ref.id, Math.max(idleDeadline, lease.expiresAt))
    return b
  }

  async getBinding(session: string): Promise<BindingRecord | undefined> {
    return this.bindings.get(session)
  }

  async useOrLock(
    session: string,
    lease: LeaseSpec,
    idleDeadline: number,
    lock: BindLock,
  ): Promise<UseOrLockResult> {
    const binding = await this.useBinding(session, lease, idleDeadline)
    const replaced = this.replaced.get(session)
    if (binding) return replaced ? { binding, replaced } : { binding }
    return { lock: (await this.tryLock(lock.name, lock.token, lock.ttlMs)) ? 'locked' : 'busy' }
  }

  async bind(
    session: string,
    binding: BindingRecord,
    idleDeadline: number,
    unlock?: Pick<BindLock, 'name' | 'token'>,
  ): Promise<boolean> {
    if (unlock) this.releaseLock(unlock.name, unlock.token)
    if (this.bindings.has(session)) return false
    this.bindings.set(session, binding)
    this.idle.set(session, idleDeadline)
    this.owners.set(binding.ref.id, { kind: 'bound', session })
    this.extendSlots(binding.slots, binding.ref.id, idleDeadline)
    return true
  }

  async unbind(
    session: string,
    refId?: string,
    replaced?: ReplacementNote,
  ): Promise<BindingRecord | undefined> {
    const b = this.bindings.get(session)
    if (!b || (refId !== undefined && b.ref.id !== refId)) return undefined
    this.dropBinding(session, b)
    this.noteReplaced(session, b, replaced)
    return b
  }

  async closeSession(session: string): Promise<BindingRecord | undefined> {
    this.replaced.delete(session)
    const b = this.bindings.get(session)
    if (!b) return undefined
    this.dropBinding(session, b)
    const now = Date.now()
    for (const [id, at] of this.closed) if (now - at > CLOSED_MEMORY_MS) this.closed.delete(id)
    this.closed.set(b.ref.id, now)
    return b
  }

  async wasClosed(refId: string): Promise<boolean> {
    const at = this.closed.get(refId)
    return at !== undefined && Date.now() - at <= CLOSED_MEMORY_MS
  }

  async replacement(session: string): Promise<SandboxReplacement | undefined> {
    return this.replaced.get(session)
  }

  async acknowledge(session: string): Promise<SandboxReplacement | undefined> {
    const r = this.replaced.get(session)
    this.replaced.delete(session)
    return r
  }

  async evictIfIdle(
    session: string,
    now: number,
    replaced?: ReplacementNote,
  ): Promise<BindingRecord | undefined> {
    const b = this.bindings.get(session)
    const deadline = this.idle.get(session)
    if (!b || deadline === undefined || deadline > now || this.liveLeases(b.ref.id, now) > 0) return undefined
    this.dropBinding(session, b)
    this.noteReplaced(session, b, replaced)
    return b
  }

  async idleSessions(now: number, limit: number): Promise<string[]> {
    return [...this.idle]
      .filter(([, d]) => d <= now)
      .sort((a, b) => a[1] - b[1])
      .slice(0, limit)
      .map(([s]) => s)
  }

  async addLease(refId: string, lease: LeaseSpec): Promise<void> {
    this.leaseSet(refId).set(lease.leaseId, lease.expiresAt)
  }

  async renewLeases(leases: readonly LeaseRenewal[], expiresAt: number): Promise<void> {
    for (const l of leases) {
      const set = this.leases.get(l.refId)
      const cur = set?.get(l.leaseId)
      if (!set || cur === undefined) continue
      set.set(l.leaseId, Math.max(cur, expiresAt))
      this.extendSlots(l.slots, l.refId, expiresAt)
    }
  }

  async endLease(refId: string, leaseId: string, touch?: LeaseTouch): Promise<void> {
    this.dropLease(refId, leaseId)
    if (!touch) return
    const b = this.bindings.get(touch.session)
    if (!b || b.ref.id !== refId) return
    this.pushIdle(touch.session, touch.idleDeadline)
    this.extendSlots(b.slots, refId, touch.idleDeadline)
  }

  async pushWarm(pool: string, entry: WarmEntry): Promise<number> {
    const list = this.warm.get(pool) ?? []
    list.push(entry)
    this.warm.set(pool, list)
    this.owners.set(entry.ref.id, { kind: 'warm', pool })
    return list.length
  }

  async claimWarm(pool: string, lease: LeaseSpec, now: number, quota?: ClaimQuota): Promise<WarmClaim> {
    const list = this.warm.get(pool) ?? []
    if (quota) {
      const set = this.slotSet(quota.slot.name)
      this.dropExpired(set, now)
      if (set.size >= quota.slot.max) {
        return { expired: [], remaining: list.length, quotaFull: { count: set.size, max: quota.slot.max } }
      }
    }
    const expired: WarmEntry[] = []
    let entry: WarmEntry | undefined
    while (!entry) {
      const head = list.shift()
      if (!head) break
      this.owners.delete(head.ref.id)
      if (head.expiresAt <= now) expired.push(head)
      else entry = head
    }
    if (entry) {
      this.leaseSet(entry.ref.id).set(lease.leaseId, lease.expiresAt)
      if (quota) this.slotSet(quota.slot.name).set(entry.ref.id, quota.expiresAt)
    }
    return entry ? { entry, expired, remaining: list.length } : { expired, remaining: list.length }
  }

  async takeExpiredWarm(pool: string, now: number): Promise<WarmEntry[]> {
    const list = this.warm.get(pool) ?? []
    const expired = list.filter((e) => e.expiresAt <= now)
    this.warm.set(
      pool,
      list.filter((e) => e.expiresAt > now),
    )
    for (const e of expired) this.owners.delete(e.ref.id)
    return expired
  }

  async drainWarm(pool: string): Promise<WarmEntry[]> {
    const list = this.warm.get(pool) ?? []
    this.warm.delete(pool)
    for (const e of list) this.owners.delete(e.ref.id)
    return list
  }

  async warmSize(pool: string): Promise<number> {
    return this.warm.get(pool)?.length ?? 0
  }

  async inUse(refIds: readonly string[], now: number): Promise<Set<string>> {
    return new Set(refIds.filter((id) => this.owners.has(id) || this.liveLeases(id, now) > 0))
  }

  async forget(refId: string, slots: readonly string[]): Promise<void> {
    this.leases.delete(refId)
    this.owners.delete(refId)
    for (const s of slots) this.slots.get(s)?.delete(refId)
  }

  async tryLock(name: string, token: string, ttlMs: number): Promise<boolean> {
    const cur = this.locks.get(name)
    const now = Date.now()
    if (cur && cur.expiresAt > now) return false
    this.locks.set(name, { token, expiresAt: now + ttlMs })
    return true
  }

  async renewLock(name: string, token: string, ttlMs: number): Promise<boolean> {
    const cur = this.locks.get(name)
    if (!cur || cur.token !== token || cur.expiresAt <= Date.now()) return false
    cur.expiresAt = Date.now() + ttlMs
    return true
  }

  async unlock(name: string, token: string): Promise<boolean> {
    return this.releaseLock(name, token)
  }

  async reserveSlots(
    claims: readonly SlotClaim[],
    member: string,
    expiresAt: number,
    now: number,
  ): Promise<SlotReservation> {
    for (const c of claims) {
      const set = this.slotSet(c.name)
      this.dropExpired(set, now)
      if (!set.has(member) && set.size >= c.max)
        return { ok: false, full: c.name, count: set.size, max: c.max }
    }
    for (const c of claims) this.slotSet(c.name).set(member, expiresAt)
    return { ok: true }
  }

  async moveSlot(names: readonly string[], from: string, to: string, expiresAt: number): Promise<void> {
    for (const n of names) {
      const set = this.slotSet(n)
      set.delete(from)
      set.set(to, expiresAt)
    }
  }

  async releaseSlots(names: readonly string[], member: string): Promise<void> {
    for (const n of names) this.slots.get(n)?.delete(member)
  }

  async slotCount(name: string, now: number): Promise<number> {
    return [...(this.slots.get(name)?.values() ?? [])].filter((exp) => exp > now).length
  }

  async close(): Promise<void> {}

  private noteReplaced(session: string, b: BindingRecord, note: ReplacementNote | undefined): void {
    if (!note || note.reason === '') return
    this.replaced.set(session, { ...note, filesLost: true, previousSandboxId: b.ref.id })
  }

  private releaseLock(name: string, token: string): boolean {
    const cur = this.locks.get(name)
    if (!cur || cur.token !== token || cur.expiresAt <= Date.now()) return false
    this.locks.delete(name)
    return true
  }

  private dropLease(refId: string, leaseId: string): void {
    const set = this.leases.get(refId)
    set?.delete(leaseId)
    if (set?.size === 0) this.leases.delete(refId)
  }

  private dropExpired(set: Map<string, number>, now: number): void {
    for (const [m, exp] of set) if (exp <= now) set.delete(m)
  }

  private dropBinding(session: string, b: BindingRecord): void {
    this.bindings.delete(session)
    this.idle.delete(session)
    const owner = this.owners.get(b.ref.id)
    if (owner?.kind === 'bound' && owner.session === session) this.owners.delete(b.ref.id)
  }

  private pushIdle(session: string, deadline: number): void {
    this.idle.set(session, Math.max(this.idle.get(session) ?? 0, deadline))
  }

  private leaseSet(refId: string): Map<string, number> {
    let set = this.leases.get(refId)
    if (!set) this.leases.set(refId, (set = new Map()))
    return set
  }

  private liveLeases(refId: string, now: number): number {
    let n = 0
    for (const exp of this.leases.get(refId)?.values() ?? []) if (exp > now) n++
    return n
  }

  private slotSet(name: string): Map<string, number> {
    let set = this.slots.get(name)
    if (!set) this.slots.set(name, (set = new Map()))
    return set
  }

  /** Extends (never shortens) a sandbox's entry in each slot set, adding it if missing. */
  private extendSlots(names: readonly string[], member: string, expiresAt: number): void {
    for (const n of names) {
      const set = this.slotSet(n)
      set.set(member, Math.max(set.get(member) ?? 0, expiresAt))
    }
  }
}
