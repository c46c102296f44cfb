import { afterEach, beforeEach, describe, expect, test } from 'vitest'
import type { BindingRecord, SessionStore, WarmEntry } from '../../src/sessions/index.js'

/** Creates a fresh, isolated store and a function that removes everything it stored. */
export type StoreFactory = () => Promise<{ store: SessionStore; cleanup: () => Promise<void> }>

const T0 = 1_700_000_000_000

function binding(id: string, tenant = 'acme'): BindingRecord {
  return {
    ref: { providerId: 'docker', id, profile: 'default' },
    tenant,
    slots: [`tenant:${tenant}`, 'pool:docker/default'],
    boundAt: T0,
  }
}

function warm(id: string, expiresAt = T0 + 60_000): WarmEntry {
  return { ref: { providerId: 'docker', id, profile: 'default' }, createdAt: T0, expiresAt }
}

/** The behaviour every {@link SessionStore} must have; run against the memory and Redis stores. */
export function runSessionStoreSuite(name: string, factory: StoreFactory): void {
  describe(`SessionStore conformance: ${name}`, () => {
    let store: SessionStore
    let cleanup: () => Promise<void>
    beforeEach(async () => {
      ;({ store, cleanup } = await factory())
    })
    afterEach(async () => {
      await cleanup()
    })

    test('bind is first-writer-wins; useBinding leases the sandbox and pushes the idle deadline', async () => {
      expect(await store.useBinding('s1', { leaseId: 'l1', expiresAt: T0 + 1000 }, T0 + 5000)).toBeUndefined()
      expect(await store.bind('s1', binding('c1'), T0 + 5000)).toBe(true)
      expect(await store.bind('s1', binding('c2'), T0 + 5000)).toBe(false)
      const b = await store.useBinding('s1', { leaseId: 'l1', expiresAt: T0 + 1000 }, T0 + 9000)
      expect(b?.ref.id).toBe('c1')
      expect(b?.tenant).toBe('acme')
      expect(await store.getBinding('s1')).toEqual(b)
      expect(await store.idleSessions(T0 + 8999, 10)).toEqual([])
      expect(await store.idleSessions(T0 + 9000, 10)).toEqual(['s1'])
      // A lease is live until its expiry.
      expect(await store.inUse(['c1', 'zz'], T0 + 500)).toEqual(new Set(['c1']))
    })

    test('evictIfIdle spares leased and fresh bindings, evicts idle ones exactly once', async () => {
      await store.bind('s1', binding('c1'), T0 + 100)
      expect(await store.evictIfIdle('s1', T0 + 99)).toBeUndefined()
      await store.addLease('c1', { leaseId: 'l1', expiresAt: T0 + 500 })
      expect(await store.evictIfIdle('s1', T0 + 200)).toBeUndefined()
      await store.endLease('c1', 'l1')
      const [a, b] = await Promise.all([store.evictIfIdle('s1', T0 + 200), store.evictIfIdle('s1', T0 + 200)])
      expect([a?.ref.id, b?.ref.id].filter(Boolean)).toEqual(['c1'])
      expect(await store.getBinding('s1')).toBeUndefined()
      expect(await store.idleSessions(T0 + 10_000, 10)).toEqual([])
      expect(await store.inUse(['c1'], T0 + 200)).toEqual(new Set())
    })

    test('a dead lease (not renewed) no longer protects a sandbox', async () => {
      await store.bind('s1', binding('c1'), T0)
      await store.addLease('c1', { leaseId: 'l1', expiresAt: T0 + 100 })
      expect((await store.evictIfIdle('s1', T0 + 100))?.ref.id).toBe('c1')
    })

    test('renewLeases extends live leases only, endLease touches the binding it still holds', async () => {
      await store.bind('s1', binding('c1'), T0 + 100)
      await store.addLease('c1', { leaseId: 'l1', expiresAt: T0 + 100 })
      await store.renewLeases(
        [
          { refId: 'c1', leaseId: 'l1', slots: [] },
          { refId: 'c9', leaseId: 'gone', slots: [] },
        ],
        T0 + 1000,
      )
      expect(await store.inUse(['c1', 'c9'], T0 + 900)).toEqual(new Set(['c1']))
      expect(await store.evictIfIdle('s1', T0 + 500)).toBeUndefined()
      await store.endLease('c1', 'l1', { session: 's1', idleDeadline: T0 + 2000 })
      expect(await store.evictIfIdle('s1', T0 + 1500)).toBeUndefined()
      // A touch for a sandbox the session no longer holds changes nothing.
      await store.endLease('c0', 'lx', { session: 's1', idleDeadline: T0 + 99_000 })
      expect((await store.evictIfIdle('s1', T0 + 2000))?.ref.id).toBe('c1')
    })

    test('unbind compares the sandbox id when given', async () => {
      await store.bind('s1', binding('c1'), T0)
      expect(await store.unbind('s1', 'other')).toBeUndefined()
      expect((await store.unbind('s1', 'c1'))?.ref.id).toBe('c1')
      expect(await store.unbind('s1')).toBeUndefined()
      await store.bind('s1', binding('c2'), T0)
      expect((await store.unbind('s1'))?.ref.id).toBe('c2')
    })

    test('a replacement notice is recorded only by the unbind that removed the binding, shown by useOrLock, cleared by acknowledge', async () => {
      const lock = { name: 'bind:s1', token: 'me', ttlMs: 1000 }
      await store.bind('s1', binding('c1'), T0 + 5000)
      // A stale unbind (another sandbox id) records nothing.
      expect(await store.unbind('s1', 'other', { at: T0, reason: 'stale' })).toBeUndefined()
      expect(await store.replacement('s1')).toBeUndefined()
      expect((await store.unbind('s1', 'c1', { at: T0 + 1, reason: 'exited (137)' }))?.ref.id).toBe('c1')
      const notice = { at: T0 + 1, reason: 'exited (137)', filesLost: true, previousSandboxId: 'c1' }
      expect(await store.replacement('s1')).toEqual(notice)
      await store.bind('s1', binding('c2'), T0 + 5000)
      const used = await store.useOrLock('s1', { leaseId: 'l1', expiresAt: T0 + 1000 }, T0 + 5000, lock)
      expect(used).toEqual({ binding: binding('c2'), replaced: notice })
      expect(await store.acknowledge('s1')).toEqual(notice)
      expect(await store.acknowledge('s1')).toBeUndefined()
      const after = await store.useOrLock('s1', { leaseId: 'l2', expiresAt: T0 + 1000 }, T0 + 5000, lock)
      expect(after).toEqual({ binding: binding('c2') })
    })

    test('idle eviction can leave a notice; closeSession unbinds, drops the notice and remembers the sandbox', async () => {
      await store.bind('s1', binding('c1'), T0 + 100)
      expect((await store.evictIfIdle('s1', T0 + 200, { at: T0 + 200, reason: 'idle' }))?.ref.id).toBe('c1')
      expect((await store.replacement('s1'))?.previousSandboxId).toBe('c1')
      await store.bind('s1', binding('c2'), T0 + 5000)
      expect(await store.wasClosed('c2')).toBe(false)
      expect((await store.closeSession('s1'))?.ref.id).toBe('c2')
      expect(await store.getBinding('s1')).toBeUndefined()
      expect(await store.replacement('s1')).toBeUndefined()
      expect(await store.wasClosed('c2')).toBe(true)
      expect(await store.wasClosed('c1')).toBe(false)
      expect(await store.closeSession('s1')).toBeUndefined()
    })

    test('warm lists: FIFO claim leases the entry, skips and returns expired ones, concurrent claims never share', async () => {
      await store.pushWarm('p', warm('w0', T0 + 10))
      await store.pushWarm('p', warm('w1'))
      expect(await store.pushWarm('p', warm('w2'))).toBe(3)
      expect(await store.inUse(['w0', 'w1', 'w2'], T0)).toEqual(new Set(['w0', 'w1', 'w2']))
      const c = await store.claimWarm('p', { leaseId: 'l', expiresAt: T0 + 1000 }, T0 + 20)
      expect(c.entry?.ref.id).toBe('w1')
      expect(c.expired.map((e) => e.ref.id)).toEqual(['w0'])
      expect(c.remaining).toBe(1)
      // The claimed one is protected by its lease only; the expired one by nothing.
      expect(await store.inUse(['w0', 'w1'], T0 + 20)).toEqual(new Set(['w1']))
      const claims = await Promise.all(
        [1, 2, 3].map((i) => store.claimWarm('p', { leaseId: `l${i}`, expiresAt: T0 + 1000 }, T0 + 20)),
      )
      expect(claims.map((x) => x.entry?.ref.id).filter(Boolean)).toEqual(['w2'])
      expect(await store.warmSize('p')).toBe(0)
    })

    test('claimWarm with a quota: claims into the slot set, or reports it full without popping', async () => {
      await store.pushWarm('p', warm('w1'))
      await store.pushWarm('p', warm('w2'))
      const quota = { slot: { name: 'tenant:t', max: 1 }, expiresAt: T0 + 5000 }
      const c = await store.claimWarm('p', { leaseId: 'l1', expiresAt: T0 + 1000 }, T0, quota)
      expect(c.entry?.ref.id).toBe('w1')
      expect(c.quotaFull).toBeUndefined()
      expect(await store.slotCount('tenant:t', T0)).toBe(1)
      const full = await store.claimWarm('p', { leaseId: 'l2', expiresAt: T0 + 1000 }, T0, quota)
      expect(full).toEqual({ expired: [], remaining: 1, quotaFull: { count: 1, max: 1 } })
      // Once the slot entry expires, the quota has room again.
      const later = await store.claimWarm('p', { leaseId: 'l3', expiresAt: T0 + 9000 }, T0 + 5000, quota)
      expect(later.entry?.ref.id).toBe('w2')
    })

    test('useOrLock: uses a binding, else takes the bind lock once; bind releases the lock', async () => {
      const lock = (token: string) => ({ name: 'bind:s1', token, ttlMs: 10_000 })
      const lease = { leaseId: 'l', expiresAt: T0 + 1000 }
      expect(await store.useOrLock('s1', lease, T0 + 100, lock('tok'))).toEqual({ lock: 'locked' })
      expect(await store.useOrLock('s1', lease, T0 + 100, lock('other'))).toEqual({ lock: 'busy' })
      // Only the holder's token releases the lock.
      expect(await store.bind('s1', binding('c1'), T0 + 100, { name: 'bind:s1', token: 'other' })).toBe(true)
      expect(await store.tryLock('bind:s1', 'x', 10_000)).toBe(false)
      await store.unbind('s1')
      expect(await store.bind('s1', binding('c1'), T0 + 100, { name: 'bind:s1', token: 'tok' })).toBe(true)
      expect(await store.tryLock('bind:s1', 'x', 10_000)).toBe(true)
      const used = await store.useOrLock('s1', { leaseId: 'l2', expiresAt: T0 + 500 }, T0 + 200, lock('y'))
      expect(used).toEqual({ binding: binding('c1') })
      expect(await store.evictIfIdle('s1', T0 + 300)).toBeUndefined()
      expect((await store.evictIfIdle('s1', T0 + 500))?.ref.id).toBe('c1')
    })

    test('takeExpiredWarm and drainWarm remove entries and their ownership', async () => {
      await store.pushWarm('p', warm('w0', T0 + 10))
      await store.pushWarm('p', warm('w1', T0 + 1000))
      expect((await store.takeExpiredWarm('p', T0 + 10)).map((e) => e.ref.id)).toEqual(['w0'])
      expect(await store.warmSize('p')).toBe(1)
      expect((await store.drainWarm('p')).map((e) => e.ref.id)).toEqual(['w1'])
      expect(await store.inUse(['w0', 'w1'], T0)).toEqual(new Set())
      expect(await store.claimWarm('p', { leaseId: 'l', expiresAt: T0 + 1 }, T0)).toEqual({
        expired: [],
        remaining: 0,
      })
    })

    test('locks: one holder at a time, token-checked renew and unlock, expiry frees them', async () => {
      const results = await Promise.all(['a', 'b', 'c'].map((t) => store.tryLock('k', t, 10_000)))
      expect(results.filter(Boolean)).toHaveLength(1)
      const holder = ['a', 'b', 'c'][results.indexOf(true)] ?? ''
      expect(await store.renewLock('k', 'nobody', 10_000)).toBe(false)
      expect(await store.unlock('k', 'nobody')).toBe(false)
      expect(await store.renewLock('k', holder, 10_000)).toBe(true)
      expect(await store.unlock('k', holder)).toBe(true)
      expect(await store.tryLock('k', 'x', 30)).toBe(true)
      const deadline = Date.now() + 2000
      while (!(await store.tryLock('k', 'y', 10_000)) && Date.now() < deadline) {
        await new Promise((r) => setTimeout(r, 10))
      }
      expect(await store.unlock('k', 'y')).toBe(true)
    })

    test('slots: capacity across sets, expiry, move and release; concurrent reservations respect max', async () => {
      const claims = [
        { name: 'tenant:t', max: 2 },
        { name: 'pool:p', max: 3 },
      ]
      const rs = await Promise.all(['r1', 'r2', 'r3'].map((m) => store.reserveSlots(claims, m, T0 + 100, T0)))
      expect(rs.filter((r) => r.ok)).toHaveLength(2)
      expect(rs.find((r) => !r.ok)).toEqual({ ok: false, full: 'tenant:t', count: 2, max: 2 })
      // A member already present counts as reserved (idempotent).
      const okOne = ['r1', 'r2', 'r3'][rs.findIndex((r) => r.ok)] ?? ''
      expect((await store.reserveSlots(claims, okOne, T0 + 100, T0)).ok).toBe(true)
      expect(await store.slotCount('tenant:t', T0)).toBe(2)
      expect(await store.slotCount('pool:p', T0)).toBe(2)
      await store.moveSlot(['tenant:t', 'pool:p'], okOne, 'c1', T0 + 5000)
      expect(await store.slotCount('tenant:t', T0 + 200)).toBe(1)
      // Expired reservations stop counting.
      expect((await store.reserveSlots(claims, 'r4', T0 + 300, T0 + 200)).ok).toBe(true)
      expect((await store.reserveSlots(claims, 'r5', T0 + 300, T0 + 200)).ok).toBe(false)
      await store.releaseSlots(['tenant:t', 'pool:p'], 'r4')
      expect((await store.reserveSlots([{ name: 'pool:p', max: 2 }], 'w', T0 + 300, T0 + 200)).ok).toBe(true)
      expect(await store.reserveSlots([{ name: 'pool:p', max: 2 }], 'w2', T0 + 300, T0 + 200)).toEqual({
        ok: false,
        full: 'pool:p',
        count: 2,
        max: 2,
      })
    })

    test('bound sandboxes hold their slots until their idle deadline; forget frees everything', async () => {
      const b = binding('c1', 't')
      await store.reserveSlots([{ name: 'tenant:t', max: 1 }], 'tok', T0 + 50, T0)
      await store.moveSlot(b.slots, 'tok', 'c1', T0 + 50)
      await store.bind('s1', b, T0 + 1000)
      expect(await store.slotCount('tenant:t', T0 + 999)).toBe(1)
      await store.useBinding('s1', { leaseId: 'l', expiresAt: T0 + 3000 }, T0 + 2000)
      expect(await store.slotCount('tenant:t', T0 + 2999)).toBe(1)
      expect((await store.reserveSlots([{ name: 'tenant:t', max: 1 }], 'x', T0 + 9000, T0 + 2500)).ok).toBe(
        false,
      )
      await store.unbind('s1')
      await store.forget('c1', b.slots)
      expect(await store.slotCount('tenant:t', T0)).toBe(0)
      expect(await store.inUse(['c1'], T0)).toEqual(new Set())
    })
  })
}
