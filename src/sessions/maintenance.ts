import type { SandboxRef } from '../sandbox/types.js'
import type { PoolCore } from './core.js'
import { POOL_LABELS, scopeLabels } from './keys.js'

/** Bindings examined per eviction pass. */
const EVICTION_BATCH = 100

/** The replacement notice of an idle-evicted session: its next call gets an empty sandbox. */
const IDLE_NOTE = (at: number) => ({
  at,
  reason: "the session was unused for longer than its profile's idleTtlMs, so its sandbox was destroyed",
})

/**
 * Destroys bound sandboxes whose session was idle past its profile's `idleTtlMs`. Each unbind is
 * atomic against `useBinding`, so a session used at the same moment keeps its sandbox.
 */
export async function evictIdle(core: PoolCore, now: number): Promise<number> {
  let evicted = 0
  for (const session of await core.store.idleSessions(now, EVICTION_BATCH)) {
    const b = await core.store.evictIfIdle(session, now, IDLE_NOTE(now))
    if (!b) continue
    evicted++
    await core.destroy(b.ref, b.slots, 'idle')
  }
  return evicted
}

/** When a sandbox was created, from the pool's label; undefined when the provider returned no labels. */
function createdAt(ref: SandboxRef): number | undefined {
  const raw = ref.labels?.[POOL_LABELS.createdAt]
  const n = raw === undefined ? NaN : Number(raw)
  return Number.isFinite(n) ? n : undefined
}

/**
 * The reaper: lists every sandbox of this scope, on each provider, and destroys those that are not
 * bound, not warm, not leased, and older than `reapGraceMs`. Sandboxes listed without their
 * creation label are destroyed only once they have been seen unused for longer than the grace
 * period (`firstSeen` remembers them between passes).
 */
export async function reapOrphans(
  core: PoolCore,
  providerIds: Iterable<string>,
  firstSeen: Map<string, number>,
): Promise<number> {
  let reaped = 0
  const listed = new Set<string>()
  for (const providerId of providerIds) {
    const provider = core.providers.get(providerId)
    const refs = await provider.list({ labels: scopeLabels(core.opts.scope) })
    for (const r of refs) listed.add(r.id)
    const now = Date.now()
    const used = await core.store.inUse(
      refs.map((r) => r.id),
      now,
    )
    for (const ref of refs) {
      if (used.has(ref.id)) {
        firstSeen.delete(ref.id)
        continue
      }
      let born = createdAt(ref) ?? firstSeen.get(ref.id)
      if (born === undefined) firstSeen.set(ref.id, (born = now))
      if (now - born < core.opts.reapGraceMs) continue
      firstSeen.delete(ref.id)
      await core.handles.drop(ref.id)
      try {
        await provider.destroy(ref)
        reaped++
      } catch (err) {
        core.stats.destroyFailures++
        core.report(err, `reaping sandbox ${ref.id} (${providerId})`)
      }
    }
  }
  for (const id of firstSeen.keys()) if (!listed.has(id)) firstSeen.delete(id)
  core.stats.reaped += reaped
  return reaped
}
