import { SandboxError } from 'e2b'
import {
  AppError,
  type Labels,
  LABELS,
  OWNER,
  ownedLabels,
  positiveIntLabel,
  POOL_LABELS,
  PROVIDER_LABELS,
  type ProviderSnapshots,
  type ResolvedProfile,
  type SandboxRef,
  secretSafeCause,
  type SnapshotCapture,
  VOLUME_LABELS,
} from '../../src/sandbox/index.js'
import { mapE2BError } from './errors.js'
import { Lifetime } from './lifetime.js'
import { lifetimeOf, type StartDeps, type StartedE2BSandbox, startE2BSandbox } from './start.js'

/** Session label values of sandboxes bound to no session (src/sessions/keys.ts): they have no seed. */
const UNBOUND_SESSIONS = new Set(['warm', 'ephemeral'])

/** Seed ids remembered as handed out (oldest forgotten first). */
const MAX_TAKEN = 10_000

/** The E2B provider's snapshots, and how a session's first create finds the sandbox restored for it. */
export interface E2BSnapshots {
  snapshots: ProviderSnapshots
  /**
   * The seed {@link ProviderSnapshots.restore} started for the session `metadata` names, when one
   * runs and this process has not handed it out yet: the session's sandbox (it is taken once).
   */
  takeSeed(metadata: Labels): Promise<StartedE2BSandbox | undefined>
}

/**
 * Snapshots on E2B's own (`POST /sandboxes/{id}/snapshots`): a snapshot is the whole sandbox (its
 * filesystem, and its memory where E2B keeps it), an E2B snapshot template named after our snapshot
 * id. E2B holds every piece of state, so snapshots survive a restart and serve a whole fleet:
 *
 * - capture: E2B snapshots the sandbox under the name `snapshotId`;
 * - restore: a sandbox of the session's profile starts from that template at once, carrying the
 *   session's labels and `sandbox-router.snapshot-seed=true` — the snapshot may be deleted right after
 *   (a fork does so), the seed holds its state; the session's next create takes the seed
 *   ({@link E2BSnapshots.takeSeed}, one metadata query of E2B), and the reaper destroys a seed no
 *   session took (it carries the pool's scope and creation time);
 * - remove: E2B deletes the snapshot template; sandboxes started from it keep running.
 */
export function e2bSnapshots(deps: StartDeps): E2BSnapshots {
  const { client, opts, errors } = deps
  const request = { requestTimeoutMs: opts.requestTimeoutMs }
  /** Seeds this process handed out (E2B metadata cannot be changed to say so). */
  const taken = new Set<string>()

  async function capture(ref: SandboxRef, snapshotId: string): Promise<SnapshotCapture> {
    try {
      await client.Sandbox.createSnapshot(ref.id, { name: snapshotId, ...request })
    } catch (err) {
      throw mapE2BError(err, { what: `snapshotting sandbox ${ref.id}`, sandboxId: ref.id }, errors)
    }
    // E2B does not report the size of a snapshot.
    return { workspaceBytes: 0, layout: 'sandbox' }
  }

  async function restore(snapshotId: string, labels: Labels, profile?: ResolvedProfile): Promise<void> {
    if (!profile)
      throw new AppError('BAD_REQUEST', `restoring snapshot ${snapshotId} on E2B needs the session's profile`)
    const metadata: Labels = {
      ...ownedLabels(labels, profile, opts.instanceId),
      [PROVIDER_LABELS.idleTtlMs]: String(profile.idleTtlMs),
      [PROVIDER_LABELS.e2bSeed]: 'true',
      [VOLUME_LABELS.snapshot]: snapshotId,
    }
    await startE2BSandbox(deps, snapshotId, profile, metadata, (err) =>
      // E2B's 404 on a create: no template (snapshot) of that name.
      err instanceof SandboxError && err.statusCode === 404
        ? new AppError('NOT_FOUND', `snapshot ${snapshotId} is not in E2B (deleted?); take a new snapshot`, {
            cause: secretSafeCause(err, opts.apiKey),
          })
        : undefined,
    )
  }

  async function remove(snapshotId: string): Promise<void> {
    try {
      // false when E2B no longer knows it: already gone is fine.
      await client.Sandbox.deleteSnapshot(snapshotId, request)
    } catch (err) {
      throw mapE2BError(err, { what: `deleting snapshot ${snapshotId}` }, errors)
    }
  }

  async function takeSeed(metadata: Labels): Promise<StartedE2BSandbox | undefined> {
    const session = metadata[LABELS.session]
    const tenant = metadata[LABELS.tenant]
    if (session === undefined || tenant === undefined || UNBOUND_SESSIONS.has(session)) return undefined
    const scope = metadata[POOL_LABELS.scope]
    const query = {
      [LABELS.owner]: OWNER,
      [LABELS.tenant]: tenant,
      [LABELS.session]: session,
      [PROVIDER_LABELS.e2bSeed]: 'true',
      ...(scope === undefined ? {} : { [POOL_LABELS.scope]: scope }),
    }
    let seed: { sandboxId: string; metadata: Labels } | undefined
    try {
      const paginator = client.Sandbox.list({ query: { metadata: query, state: ['running'] }, ...request })
      while (paginator.hasNext && !seed)
        seed = (await paginator.nextItems()).find((s) => !taken.has(s.sandboxId))
    } catch (err) {
      throw mapE2BError(err, { what: `finding the sandbox restored for session ${session}` }, errors)
    }
    if (!seed) return undefined
    taken.add(seed.sandboxId)
    // Bounded: a seed is taken within its session's first create, long before this wraps.
    if (taken.size > MAX_TAKEN) taken.delete(taken.values().next().value as string)
    const ttl = positiveIntLabel(seed.metadata[PROVIDER_LABELS.idleTtlMs], opts.defaultIdleTtlMs)
    const asked = Lifetime.initialFor(ttl, opts.lifetimeSlackMs)
    const start = Date.now()
    try {
      const sdk = await client.Sandbox.connect(seed.sandboxId, { ...request, timeoutMs: asked })
      return { sdk, lifetime: lifetimeOf(sdk, opts, ttl, start + asked) }
    } catch (err) {
      const what = `taking sandbox ${seed.sandboxId}, started from snapshot ${seed.metadata[VOLUME_LABELS.snapshot] ?? '?'} for session ${session}`
      throw mapE2BError(err, { what, sandboxId: seed.sandboxId }, errors)
    }
  }

  return { snapshots: { wholeSandbox: true, capture, restore, remove }, takeSeed }
}
