import { createHash } from 'node:crypto'
import { LABELS } from '../sandbox/types.js'
import type { Labels } from '../sandbox/types.js'
import type { SessionKey } from './types.js'

/** Label keys the pool adds beside {@link LABELS}. */
export const POOL_LABELS = {
  /** The pool's `scope` option: `reap()` only touches sandboxes of its own scope. */
  scope: 'sandbox-router.scope',
  /** Creation time (ms since epoch) as a decimal string: `reap()` spares young sandboxes. */
  createdAt: 'sandbox-router.created-at',
  /** The engine the sandbox lives on (fleets over many Docker engines). */
  engine: 'sandbox-router.engine',
} as const

/** Value of {@link LABELS.owner} on every sandbox the service creates. */
export const OWNER = 'sandbox-router'

/** Label value of {@link LABELS.session} for sandboxes created for the warm pool. */
export const WARM_SESSION = 'warm'
/** Label value of {@link LABELS.session} for sandboxes created for one call. */
export const EPHEMERAL_SESSION = 'ephemeral'

/**
 * Stable id of a session: a hash of `(tenant, sessionId, providerId, profile)`. Hashing keeps store
 * keys and labels short and free of separators the parts may contain.
 */
export function sessionHash(key: SessionKey): string {
  const parts = JSON.stringify([key.tenant, key.sessionId ?? null, key.providerId, key.profile])
  return createHash('sha256').update(parts).digest('hex').slice(0, 32)
}

/** Name of the warm pool of a (provider, profile) pair (`@<engine>` when kept per engine). */
export function poolKey(providerId: string, profile: string, engine?: string): string {
  return engine === undefined ? `${providerId}/${profile}` : `${providerId}/${profile}@${engine}`
}

/** Slot-set name counting a tenant's sandboxes (the per-tenant quota). */
export function tenantSlots(tenant: string): string {
  return `tenant:${tenant}`
}

/** Slot-set name counting a (provider, profile) pool's sandboxes (its `maxSize`). */
export function poolSlots(pool: string): string {
  return `pool:${pool}`
}

/** Slot-set name counting a provider's sandboxes (its engine's cap), per engine when given. */
export function providerSlots(providerId: string, engine?: string): string {
  return engine === undefined ? `provider:${providerId}` : `provider:${providerId}@${engine}`
}

/** Labels of a sandbox about to be created. */
export function createLabels(opts: {
  scope: string
  instanceId: string
  profile: string
  tenant?: string
  session: string
  now: number
  engine?: string
}): Labels {
  const labels: Labels = {
    [LABELS.owner]: OWNER,
    [LABELS.session]: opts.session,
    [LABELS.profile]: opts.profile,
    [LABELS.instance]: opts.instanceId,
    [POOL_LABELS.scope]: opts.scope,
    [POOL_LABELS.createdAt]: String(opts.now),
  }
  if (opts.tenant !== undefined) labels[LABELS.tenant] = opts.tenant
  if (opts.engine !== undefined) labels[POOL_LABELS.engine] = opts.engine
  return labels
}

/** Labels `reap()` lists by: everything this service created in one scope. */
export function scopeLabels(scope: string): Labels {
  return { [LABELS.owner]: OWNER, [POOL_LABELS.scope]: scope }
}
