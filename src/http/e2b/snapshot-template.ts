/**
 * `Sandbox.create(<snapshot>)`: E2B's snapshots are templates, so a create names one by its id or
 * name (src/http/e2b/snapshots.ts has the snapshot routes).
 */
import type { SnapshotService, SnapshotView } from '../../services/index.js'
import type { E2BRouteDeps } from './deps.js'
import { E2BApiError } from './errors.js'

/** A snapshot query as E2B takes it: `name`, `team/name` or `name:tag` all name `name`. */
export const bareName = (q: string): string => q.replace(/^[^/]*\//, '').replace(/:[^:]*$/, '')

/** The tenant's ready snapshot whose id or name is `ref` (E2B's snapshot names are templates). */
export async function findSnapshot(
  snapshots: SnapshotService,
  tenant: string,
  ref: string,
): Promise<SnapshotView | undefined> {
  const byId = await snapshots.get(tenant, ref)
  if (byId) return byId
  const name = bareName(ref)
  return (await snapshots.list(tenant)).find((s) => s.name === name)
}

/** What `Sandbox.create(<snapshot>)` starts from: the snapshot's profile, and how to start the session. */
export interface SnapshotTemplate {
  snapshotId: string
  profile: string
  provider: string
  /** Starts session `sandboxId` (on `profile`, default the snapshot's) from the snapshot. */
  start(sandboxId: string, profile?: string): Promise<void>
}

/**
 * The snapshot a create's `templateID` names (its id or name), when it is the tenant's and no
 * configured template has that name; undefined otherwise.
 */
export async function snapshotTemplate(
  deps: E2BRouteDeps,
  tenant: string,
  templateId: string,
): Promise<SnapshotTemplate | undefined> {
  const snapshots = deps.snapshots
  if (!snapshots || deps.e2b.templates[templateId] !== undefined) return undefined
  const snap = await findSnapshot(snapshots, tenant, templateId)
  if (!snap) return undefined
  if (snap.state !== 'ready')
    throw new E2BApiError(
      409,
      `snapshot ${snap.id} is ${snap.state}${snap.reason ? `: ${snap.reason}` : ''}; create from a ready snapshot`,
    )
  return {
    snapshotId: snap.id,
    profile: snap.profile,
    provider: snap.provider,
    start: async (sandboxId, profile) => {
      await snapshots.startSession(tenant, {
        id: sandboxId,
        snapshot: snap.id,
        ...(profile === undefined ? {} : { profile }),
      })
    },
  }
}
