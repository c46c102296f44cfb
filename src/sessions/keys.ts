import { createHash } from 'node:crypto'
import type { SessionKey } from './types.js'

// The label schema (keys, owner value, the pool's label builders) lives in src/sandbox/labels.ts;
// re-exported here for the session modules and the package's sessions index.
export { OWNER, POOL_LABELS, poolLabels as createLabels, scopeLabels } from '../sandbox/labels.js'

/** Value of the session label (`LABELS.session`) on sandboxes created for the warm pool. */
export const WARM_SESSION = 'warm'
/** Value of the session label (`LABELS.session`) on sandboxes created for one call. */
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
