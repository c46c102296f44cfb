import { AppError } from '../errors.js'
import type { PoolCore, Target } from './core.js'
import { poolSlots, providerSlots, tenantSlots } from './keys.js'
import type { SlotClaim } from './store/types.js'

/*
 * What bounds a fleet: each tenant's sandboxes (`quotas.maxSandboxes`, the pool's
 * `maxSandboxesPerTenant`); when a profile sets one, the profile's sandboxes across every tenant
 * (`profiles.<name>.pool.maxSize`); when a provider has one, its sandboxes across every profile and
 * tenant (`providers.<id>.maxSandboxes`: what one engine holds). All are counted fleet-wide in the
 * store's slot sets.
 * Reaching any of them fails at once with QUOTA_EXCEEDED: room only comes back when a session is
 * deleted or idles out, so waiting for it would just turn the answer into a timeout.
 */

/**
 * `QUOTA_EXCEEDED` because one of the fleet's bounds is reached; `bound` says which, so a routing
 * policy can tell the tenant's own quota (no other provider helps) from a profile's or a provider's
 * capacity (another candidate may have room).
 */
export class BoundReached extends AppError {
  override readonly name = 'BoundReached'
  constructor(
    readonly bound: 'tenant' | 'profile' | 'provider',
    message: string,
  ) {
    super('QUOTA_EXCEEDED', message)
  }
}

/** Advice shared by every bound: what frees room. */
function freeRoom(t: Target): string {
  return (
    'delete sessions you no longer need (DELETE /v1/sessions/<id>, or `sbx sessions rm <id>`); ' +
    `a session unused for its profile's idleTtlMs (${t.profile.idleTtlMs} ms here) frees its sandbox by itself`
  )
}

/** The tenant's slot set and its capacity. */
export function tenantClaim(core: PoolCore, t: Target): SlotClaim {
  return { name: tenantSlots(t.key.tenant), max: core.opts.maxSandboxesPerTenant }
}

/** The profile's slot set and its capacity; unbounded profiles get an effectively infinite one. */
export function profileClaim(t: Pick<Target, 'pool' | 'profile'>): SlotClaim {
  return { name: poolSlots(t.pool), max: t.profile.pool.maxSize ?? Number.MAX_SAFE_INTEGER }
}

/** The provider's slot set and its capacity; unbounded unless the pool options cap it. */
export function providerClaim(core: PoolCore, t: Pick<Target, 'key'>): SlotClaim {
  const max = core.opts.maxSandboxesPerProvider[t.key.providerId]
  const engine = core.opts.providerEngines[t.key.providerId]
  return { name: providerSlots(t.key.providerId, engine), max: max ?? Number.MAX_SAFE_INTEGER }
}

/** The slot sets a warm sandbox of `t`'s pool occupies (no tenant yet). */
export function warmSlots(core: PoolCore, t: Pick<Target, 'key' | 'pool' | 'profile'>): SlotClaim[] {
  return [profileClaim(t), providerClaim(core, t)]
}

/** `QUOTA_EXCEEDED`: the provider's (engine's) cap is reached, all profiles and tenants together. */
export function providerCapReached(core: PoolCore, t: Target, count: number): AppError {
  core.stats.quotaRejections++
  const key = `providers.${t.key.providerId}.maxSandboxes`
  const max = core.opts.maxSandboxesPerProvider[t.key.providerId]
  return new BoundReached(
    'provider',
    `provider '${t.key.providerId}' holds ${count} sandbox(es), its cap (${key} = ${max ?? 'unbounded'}, ` +
      `counted across the fleet, every profile and tenant); ${freeRoom(t)}; or raise ${key}`,
  )
}

/** `QUOTA_EXCEEDED`: the tenant holds `count` sandboxes, its maximum. */
export function tenantQuotaExceeded(core: PoolCore, t: Target, count: number): AppError {
  core.stats.quotaRejections++
  const max = core.opts.maxSandboxesPerTenant
  return new BoundReached(
    'tenant',
    `tenant '${t.key.tenant}' holds ${count} sandbox(es), its maximum (quotas.maxSandboxes = ${max}, ` +
      `counted across the fleet); ${freeRoom(t)}; or raise quotas.maxSandboxes`,
  )
}

/** `QUOTA_EXCEEDED`: the profile's cap is reached, all tenants together. */
export function profileCapReached(core: PoolCore, t: Target, count: number): AppError {
  core.stats.quotaRejections++
  const key = `profiles.${t.profile.name}.pool.maxSize`
  return new BoundReached(
    'profile',
    `profile '${t.profile.name}' (provider '${t.key.providerId}') holds ${count} sandbox(es), its cap ` +
      `(${key} = ${t.profile.pool.maxSize ?? 'unbounded'}, counted across the fleet and every tenant); ` +
      `${freeRoom(t)}; or raise ${key}`,
  )
}

/**
 * The advisory check of {@link SessionPool.admit}: a bound session passes (and is then admitted for a while without a store read: recently-bound.ts);
 * otherwise the tenant's and the profile's live slot counts must leave room for one more sandbox
 * (warm sandboxes of the profile count toward its cap, but a new session can claim one, so they do
 * not block it).
 */
export async function admit(core: PoolCore, t: Target): Promise<void> {
  const now = Date.now()
  if (t.session !== undefined) {
    if (core.recentlyBound.has(t.session, now)) return
    if (await core.store.getBinding(t.session)) return core.recentlyBound.add(t.session, now)
  }
  const tenant = tenantClaim(core, t)
  const tenantCount = await core.store.slotCount(tenant.name, now)
  if (tenantCount >= tenant.max) throw tenantQuotaExceeded(core, t, tenantCount)
  const caps: [SlotClaim, (count: number) => AppError][] = []
  if (t.profile.pool.maxSize !== undefined) caps.push([profileClaim(t), (n) => profileCapReached(core, t, n)])
  if (core.opts.maxSandboxesPerProvider[t.key.providerId] !== undefined)
    caps.push([providerClaim(core, t), (n) => providerCapReached(core, t, n)])
  for (const [cap, refuse] of caps) {
    const count = await core.store.slotCount(cap.name, now)
    if (count < cap.max) continue
    // A warm sandbox already counts toward both caps: claiming it takes no new room.
    if ((await core.store.warmSize(t.pool)) > 0) return
    throw refuse(count)
  }
}
