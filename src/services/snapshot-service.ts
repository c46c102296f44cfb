import { randomUUID } from 'node:crypto'
import { AppError } from '../errors.js'
import type { CaptureOptions, ForkResult, SessionView, SnapshotService, SnapshotView } from './index.js'
import type { ResolvedProfile } from '../sandbox/profiles.js'
import type { Labels, SandboxProvider } from '../sandbox/types.js'
import type { AcquireOptions, Lease, SessionKey } from '../sessions/types.js'
import type { SessionDirectory, SessionRecord } from './session-directory.js'
import type { PooledSessionService } from './session-service.js'
import { keyOf } from './session-service.js'
import type { SnapshotDirectory, SnapshotRecord } from './snapshot-directory.js'

const MiB = 1024 * 1024

/** What the snapshot service needs of the session pool. */
export interface SnapshotPool {
  acquire(key: SessionKey, opts?: AcquireOptions): Promise<Lease>
  sessionLabels(key: SessionKey): Labels
}

/** What the snapshot service needs of the provider registry. */
export interface SnapshotProviders {
  get(providerId: string): SandboxProvider
  profile(name: string, providerId?: string): ResolvedProfile
}

/** Options of {@link PooledSnapshotService}. */
export interface SnapshotServiceOptions {
  sessions: PooledSessionService
  directory: SessionDirectory
  snapshots: SnapshotDirectory
  pool: SnapshotPool
  providers: SnapshotProviders
  /** Snapshots one tenant may hold (config `quotas.maxSnapshots`). */
  maxSnapshots: number
  /**
   * A record still `creating` this long after it began reads as `failed` and is swept: the process
   * taking it stopped mid-capture (ms). @default {@link SNAPSHOT_CREATING_LIMIT_MS}
   */
  creatingLimitMs?: number
  /** @default Date.now */
  now?: () => number
  /**
   * The Docker engine this process's provider reaches (`queue.engineRouting`): recorded in each
   * snapshot taken here, since its image and workspace copy exist only on that engine.
   */
  engineId?: string
  /**
   * Places a session started here from a snapshot on this process's engine (where its workspace
   * was restored), so its calls and jobs go there; absent without engine routing.
   */
  pin?: (key: SessionKey) => Promise<void>
}

/**
 * How long a snapshot may stay `creating` (ms): far past the longest capture (a `docker commit`
 * and a copy of a workspace volume bounded by its `sizeMb`), so only a crashed capture reaches it.
 */
export const SNAPSHOT_CREATING_LIMIT_MS = 15 * 60_000

function view(r: SnapshotRecord): SnapshotView {
  const { tenant: _t, engineId: _e, layout: _l, ...rest } = r
  return rest
}

/**
 * Snapshots of sessions, sessions started from one, and forks (both in one call), on the session
 * directory, the pool (a lease of the source session's sandbox) and the providers' snapshot
 * capability. Records live in the {@link SnapshotDirectory} (Redis in a fleet).
 */
export class PooledSnapshotService implements SnapshotService {
  private readonly creatingLimitMs: number
  private readonly now: () => number

  constructor(private readonly o: SnapshotServiceOptions) {
    this.creatingLimitMs = o.creatingLimitMs ?? SNAPSHOT_CREATING_LIMIT_MS
    this.now = o.now ?? Date.now
  }

  /**
   * The record as readers see it: one still `creating` past the bound is `failed` (its capture
   * ended with the process that ran it: a crash, a kill, a lost host), with the reason.
   */
  private settled(r: SnapshotRecord): SnapshotRecord {
    if (r.state !== 'creating' || this.now() - r.createdAt <= this.creatingLimitMs) return r
    const s = Math.round(this.creatingLimitMs / 1000)
    return {
      ...r,
      state: 'failed',
      reason:
        `the snapshot was still being taken ${s} s after it began: the process taking it stopped mid-capture ` +
        `(a crash or a restart); it cannot start sessions and is removed by the next sweep (or DELETE /v1/snapshots/${r.id}); take a new one`,
    }
  }

  /**
   * Removes every tenant's `failed` snapshots (records stuck in `creating` past the bound) with
   * whatever data the provider holds for them; resolves with how many went. The runtime runs it on
   * the pool's reap interval, and `sbx reap` runs it once.
   *
   * A record that names an engine (`queue.engineRouting`) is swept only by a process beside that
   * engine — its image and volume exist there alone, so removing the record anywhere else would
   * orphan them; it stays listed as `failed` until a worker of its engine (or `sbx reap` run with
   * `DOCKER_HOST` at it) sweeps it.
   *
   * @param opts.engineId the engine this sweeper reaches; defaults to this service's own engine
   */
  async sweepFailed(opts: { engineId?: string } = {}): Promise<number> {
    const here = opts.engineId ?? this.o.engineId
    let removed = 0
    for (const tenant of await this.o.snapshots.tenants()) {
      for (const r of await this.o.snapshots.list(tenant)) {
        if (this.settled(r).state !== 'failed') continue
        if (r.engineId !== undefined && r.engineId !== here) continue
        if (!(await this.o.snapshots.delete(tenant, r.id))) continue
        removed++
        await this.removeData(r.provider, r.id)
      }
    }
    return removed
  }

  /**
   * Removes the data of snapshots deleted while their engine was away (see {@link delete}) from
   * this process's engine; resolves with how many went. The runtime runs it with
   * {@link sweepFailed}, and `sbx reap` once.
   *
   * @param opts.engineId the engine this sweeper reaches; defaults to this service's own engine
   */
  async sweepLeftovers(opts: { engineId?: string } = {}): Promise<number> {
    const here = opts.engineId ?? this.o.engineId
    if (here === undefined) return 0
    let removed = 0
    for (const r of await this.o.snapshots.leftovers(here)) {
      await this.removeData(r.provider, r.id)
      await this.o.snapshots.forgetLeftover(here, r.id)
      removed++
    }
    return removed
  }

  private async removeData(providerId: string, id: string): Promise<void> {
    let cap: ReturnType<PooledSnapshotService['capability']>
    try {
      cap = this.capability(providerId)
    } catch {
      return // the provider is no longer configured: nothing of it to remove here
    }
    await cap.remove(id)
  }

  /** The provider's snapshot capability, or `UNSUPPORTED` naming the provider. */
  private capability(providerId: string) {
    let provider: SandboxProvider
    try {
      provider = this.o.providers.get(providerId)
    } catch (err) {
      throw new AppError(
        'UNSUPPORTED',
        `snapshots need a session on a provider; '${providerId}' is not one (a routing policy?): open the session on a provider such as 'docker'`,
        { cause: err },
      )
    }
    if (!provider.snapshots)
      throw new AppError(
        'UNSUPPORTED',
        `provider '${providerId}' has no snapshots (see GET /v1/providers, field workspaces); use a docker profile with workspace: { persistent: true }`,
      )
    return provider.snapshots
  }

  private persistentProfile(name: string, providerId: string): ResolvedProfile {
    const profile = this.o.providers.profile(name, providerId)
    if (!profile.workspace.persistent)
      throw new AppError(
        'BAD_REQUEST',
        `profile '${name}' has no persistent workspace; snapshots and forks need a profile with workspace: { persistent: true }`,
      )
    return profile
  }

  /**
   * A profile a tmpfs snapshot can start sessions on: no persistent workspace (its copy is a seed,
   * not a volume to mount), and no warm sandboxes (a session would take one made before, without
   * the snapshot's files).
   */
  private inMemoryProfile(snap: SnapshotRecord, name: string): void {
    const profile = this.o.providers.profile(name, snap.provider)
    const holds = snap.layout === 'sandbox' ? 'a whole sandbox' : "a sandbox's in-memory files"
    if (profile.workspace.persistent)
      throw new AppError(
        'BAD_REQUEST',
        `snapshot ${snap.id} holds ${holds}, not a persistent workspace; start it on a profile without workspace.persistent (such as its own, '${snap.profile}')`,
      )
    if (profile.pool.minIdle > 0)
      throw new AppError(
        'BAD_REQUEST',
        `profile '${name}' keeps warm sandboxes (pool.minIdle ${profile.pool.minIdle}), which lack snapshot ${snap.id}'s files; ` +
          'start sessions from the snapshot on a profile with pool.minIdle: 0',
      )
  }

  async create(
    tenant: string,
    sessionId: string,
    opts: CaptureOptions = {},
  ): Promise<SnapshotView | undefined> {
    const r = await this.o.directory.get(tenant, sessionId)
    if (!r) return undefined
    return view(await this.capture(r, opts))
  }

  private async capture(r: SessionRecord, opts: CaptureOptions): Promise<SnapshotRecord> {
    const snapshots = this.capability(r.provider)
    // A whole-sandbox snapshot (E2B's) needs no workspace and takes no tmpfs option.
    const whole = snapshots.wholeSandbox === true
    const inMemory =
      !whole && opts.tmpfs === true && !this.o.providers.profile(r.profile, r.provider).workspace.persistent
    const profile =
      inMemory || whole
        ? this.o.providers.profile(r.profile, r.provider)
        : this.persistentProfile(r.profile, r.provider)
    const key = keyOf(r)
    const record: SnapshotRecord = {
      id: `snap-${randomUUID()}`,
      tenant: r.tenant,
      provider: r.provider,
      profile: r.profile,
      sessionId: r.id,
      createdAt: Date.now(),
      state: 'creating',
      workspaceBytes: 0,
      ...(opts.name === undefined ? {} : { name: opts.name }),
      ...(this.o.engineId === undefined ? {} : { engineId: this.o.engineId }),
    }
    await this.o.snapshots.add(record, this.o.maxSnapshots)
    try {
      const lease = await this.o.pool.acquire(key)
      let outcome: 'ok' | 'lost' = 'ok'
      try {
        const cap = await snapshots.capture(lease.ref, record.id, {
          labels: this.o.pool.sessionLabels(key),
          maxWorkspaceBytes: (profile.workspace.sizeMb ?? profile.diskMb) * MiB,
          ...(inMemory ? { tmpfs: true } : {}),
        })
        record.workspaceBytes = cap.workspaceBytes
        if (cap.layout) record.layout = cap.layout
      } catch (err) {
        if (err instanceof AppError && err.code === 'SANDBOX_LOST') outcome = 'lost'
        throw err
      } finally {
        await lease.release(outcome)
      }
      record.state = 'ready'
      await this.o.snapshots.update(record)
      // Deleted while it was being taken: its data goes too.
      if (!(await this.o.snapshots.get(r.tenant, record.id))) await snapshots.remove(record.id)
      return record
    } catch (err) {
      await this.o.snapshots.delete(r.tenant, record.id)
      await snapshots.remove(record.id).catch(() => undefined)
      throw err
    }
  }

  async list(tenant: string): Promise<SnapshotView[]> {
    return (await this.o.snapshots.list(tenant)).map((r) => view(this.settled(r)))
  }

  async get(tenant: string, id: string): Promise<SnapshotView | undefined> {
    const r = await this.o.snapshots.get(tenant, id)
    return r ? view(this.settled(r)) : undefined
  }

  /**
   * Deletes the record and the snapshot's data. Data on another engine than this process's (the
   * fleet could not reach a worker there: the engine is down or gone) cannot be removed from here:
   * the record goes at once and the data is noted as left on that engine, whose workers remove it
   * on their next sweep ({@link sweepLeftovers}) once it is back.
   */
  async delete(tenant: string, id: string): Promise<boolean> {
    const r = await this.o.snapshots.get(tenant, id)
    if (!r) return false
    if (r.engineId !== undefined && r.engineId !== this.o.engineId)
      return this.o.snapshots.leaveOnEngine({ ...r, engineId: r.engineId })
    if (!(await this.o.snapshots.delete(tenant, id))) return false
    // Sessions started from it keep their own copy (workspace and image tag).
    await this.removeData(r.provider, id)
    return true
  }

  async startSession(
    tenant: string,
    input: { id?: string; provider?: string; profile?: string; snapshot: string },
  ): Promise<SessionView> {
    const found = await this.o.snapshots.get(tenant, input.snapshot)
    const snap = found ? this.settled(found) : undefined
    if (snap?.state === 'failed')
      throw new AppError('CONFLICT', `snapshot ${snap.id} failed: ${snap.reason ?? 'unknown'}`)
    if (!snap || snap.state !== 'ready')
      throw new AppError('NOT_FOUND', `no snapshot ${input.snapshot}; list them with GET /v1/snapshots`)
    return this.restore(snap, input)
  }

  private async restore(
    snap: SnapshotRecord,
    input: { id?: string; provider?: string; profile?: string },
  ): Promise<SessionView> {
    if (input.provider !== undefined && input.provider !== snap.provider)
      throw new AppError(
        'BAD_REQUEST',
        `snapshot ${snap.id} was taken on provider '${snap.provider}'; start its sessions there (omit provider)`,
      )
    const profile = input.profile ?? snap.profile
    const snapshots = this.capability(snap.provider)
    if (snap.layout === 'tmpfs' || snap.layout === 'sandbox') this.inMemoryProfile(snap, profile)
    else this.persistentProfile(profile, snap.provider)
    const session = await this.o.sessions.create(
      snap.tenant,
      { ...(input.id ? { id: input.id } : {}), provider: snap.provider, profile },
      { admit: true },
    )
    const key = keyOf({ id: session.id, tenant: snap.tenant, provider: snap.provider, profile, createdAt: 0 })
    try {
      await snapshots.restore(
        snap.id,
        this.o.pool.sessionLabels(key),
        this.o.providers.profile(profile, snap.provider),
      )
      // Its workspace now exists on this engine only: its sandboxes must start here.
      await this.o.pin?.(key)
    } catch (err) {
      await this.o.sessions.delete(snap.tenant, session.id).catch(() => undefined)
      throw err
    }
    return session
  }

  async fork(
    tenant: string,
    sessionId: string,
    opts: { count: number; keepSnapshot: boolean; tmpfs?: boolean },
  ): Promise<ForkResult | undefined> {
    const r = await this.o.directory.get(tenant, sessionId)
    if (!r) return undefined
    const snap = await this.capture(r, opts.tmpfs ? { tmpfs: true } : {})
    const made: SessionView[] = []
    try {
      const results = await Promise.allSettled(
        Array.from({ length: opts.count }, () => this.restore(snap, {})),
      )
      for (const x of results) if (x.status === 'fulfilled') made.push(x.value)
      const failed = results.find((x) => x.status === 'rejected')
      if (failed) {
        for (const s of made) await this.o.sessions.delete(tenant, s.id).catch(() => undefined)
        throw failed.reason
      }
      return { sessions: made, ...(opts.keepSnapshot ? { snapshot: view(snap) } : {}) }
    } finally {
      if (!opts.keepSnapshot || made.length < opts.count) await this.delete(tenant, snap.id)
    }
  }
}
