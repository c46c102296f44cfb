import { randomUUID } from 'node:crypto'
import { sleep } from './backoff.js'
import { foreignEngine, obtain } from './binder.js'
import { admit } from './bounds.js'
import type { Obtained } from './binder.js'
import { describeTarget, isLost, PoolCore } from './core.js'
import type { PoolErrorHandler, Target } from './core.js'
import { Deadline } from './deadline.js'
import { LeaseBook } from './lease.js'
import type { LiveLease } from './lease.js'
import { evictIdle, reapOrphans } from './maintenance.js'
import { SessionPoolOptionsSchema } from './options.js'
import type { SessionPoolOptions } from './options.js'
import type { AcquireOutcome, PoolStats } from './stats.js'
import type { BindLock, SessionStore } from './store/types.js'
import type {
  AcquireOptions,
  Lease,
  SandboxReplacement,
  SessionKey,
  SessionPool,
  SessionState,
} from './types.js'
import { withoutRecreateAdvice } from './replacement-reason.js'
import { WarmPools } from './warm.js'
import { AppError } from '../errors.js'
import type { Labels } from '../sandbox/types.js'
import type { ProviderResolver } from '../sandbox/resolver.js'
import { createLabels } from './keys.js'

/** A replacement notice of a session whose workspace persists: it says the workspace was kept. */
function keptNotice(t: Target, r: SandboxReplacement | undefined): SandboxReplacement | undefined {
  if (!r || !t.profile.workspace.persistent || !t.provider.workspaces) return r
  return { ...r, workspaceKept: true }
}

/** Dependencies and options of {@link createSessionPool}. */
export interface CreateSessionPoolOptions extends SessionPoolOptions {
  /** The provider registry (or any {@link ProviderResolver}). */
  providers: ProviderResolver
  /** `RedisSessionStore` for a fleet, `MemorySessionStore` for one process. Not closed by the pool. */
  store: SessionStore
  /** Receives errors of background work and failed destroys. @default ignore */
  onError?: PoolErrorHandler
}

/** Outcome of one bind; `got` (the binder's leased sandbox) when it bound one. */
interface BindResult {
  readonly outcome: AcquireOutcome
  readonly got?: Obtained
}

/**
 * Creates the session pool. Options are validated once (zod); timers start at once (unref'd) and
 * stop on `shutdown()`.
 */
export function createSessionPool(options: CreateSessionPoolOptions): SandboxSessionPool {
  const { providers, store, onError, ...rest } = options
  const opts = SessionPoolOptionsSchema.parse(rest)
  const core = new PoolCore(
    { ...opts, instanceId: opts.instanceId ?? randomUUID() },
    providers,
    store,
    onError ?? (() => {}),
  )
  return new SandboxSessionPool(core)
}

/** The {@link SessionPool} implementation: session affinity, warm pools, leases, eviction, reaper. */
export class SandboxSessionPool implements SessionPool {
  private readonly warm: WarmPools
  private readonly leases: LeaseBook
  private readonly binds = new Map<string, Promise<BindResult>>()
  private readonly timers: NodeJS.Timeout[] = []
  private readonly firstSeen = new Map<string, number>()
  private shutdownPromise: Promise<void> | undefined

  /** Prefer {@link createSessionPool}. */
  constructor(private readonly core: PoolCore) {
    this.warm = new WarmPools(core)
    this.leases = new LeaseBook(core)
    for (const p of core.opts.prewarm) {
      this.warm.ensure(core.target({ tenant: 'prewarm', providerId: p.providerId, profile: p.profile }))
    }
    const o = core.opts
    this.every(Math.max(1, Math.floor(o.leaseTtlMs / 3)), 'renewing leases', () => this.leases.heartbeat())
    this.every(o.maintenanceIntervalMs, 'pool maintenance', () => this.maintain())
    this.every(o.reapIntervalMs, 'reaping orphan sandboxes', () => this.reap())
  }

  async acquire(key: SessionKey, opts: AcquireOptions = {}): Promise<Lease> {
    const { core } = this
    if (core.closed) throw core.shutdownSignal.reason
    const t = core.target(key)
    const timeoutMs = opts.timeoutMs ?? core.opts.acquireTimeoutMs
    const dl = new Deadline(timeoutMs, [opts.signal, core.shutdownSignal], describeTarget(t))
    if (opts.createAttempts !== undefined) dl.createAttempts = opts.createAttempts
    core.stats.pendingAcquires++
    try {
      const lease =
        t.session === undefined
          ? await this.acquireEphemeral(t, dl)
          : await this.acquireBound(t, t.session, dl)
      core.stats.acquires++
      this.warm.ensure(t)
      return lease
    } catch (err) {
      core.stats.acquireFailures++
      throw dl.translate(err)
    } finally {
      core.stats.pendingAcquires--
      dl.dispose()
    }
  }

  async close(key: SessionKey): Promise<void> {
    const t = this.core.target(key)
    if (t.session === undefined) return
    this.core.recentlyBound.forget(t.session)
    const b = await this.core.store.closeSession(t.session)
    if (b) await this.core.destroy(b.ref, b.slots, 'closed')
    // A persistent workspace outlives the sandbox, not the session.
    await t.provider.workspaces?.drop(this.sessionLabels(key))
  }

  /**
   * Labels identifying a session's sandboxes and persistent workspace (owner, scope, tenant,
   * session hash, profile): what provider workspace and snapshot calls take. `BAD_REQUEST` for a
   * key without a session id.
   */
  sessionLabels(key: SessionKey): Labels {
    const t = this.core.target(key)
    if (t.session === undefined)
      throw new AppError('BAD_REQUEST', 'an ephemeral call has no session; give a session id')
    return createLabels({
      scope: this.core.opts.scope,
      instanceId: this.core.opts.instanceId,
      profile: t.profile.name,
      tenant: key.tenant,
      session: t.session,
      now: Date.now(),
    })
  }

  async admit(key: SessionKey): Promise<void> {
    if (this.core.closed) throw this.core.shutdownSignal.reason
    await admit(this.core, this.core.target(key))
  }

  async state(key: SessionKey): Promise<SessionState> {
    const t = this.core.target(key)
    if (t.session === undefined) return {}
    const [binding, replaced] = await Promise.all([
      this.core.store.getBinding(t.session),
      this.core.store.replacement(t.session),
    ])
    const notice = keptNotice(t, replaced ?? undefined)
    return {
      ...(binding ? { sandboxId: binding.ref.id } : {}),
      ...(notice ? { sandboxReplaced: notice } : {}),
    }
  }

  async acknowledge(key: SessionKey): Promise<SandboxReplacement | undefined> {
    const t = this.core.target(key)
    return t.session === undefined ? undefined : this.core.store.acknowledge(t.session)
  }

  /** Destroys sandboxes of this scope that are neither bound, warm nor leased (after a grace period). */
  reap(): Promise<number> {
    const ids = this.core.providers.providerIds?.() ?? this.core.usedProviders
    return reapOrphans(this.core, ids, this.firstSeen)
  }

  /** One pass of idle eviction, warm-TTL expiry, warm refill and handle cleanup (the timer runs it too). */
  async maintain(): Promise<void> {
    const now = Date.now()
    await evictIdle(this.core, now)
    await this.warm.maintain(now)
    await this.core.handles.closeIdle(now, this.core.opts.handleIdleMs)
  }

  /** Resolves when no warm refill of this process is running (for tests and benchmarks). */
  warmSettled(): Promise<void> {
    return this.warm.settled()
  }

  shutdown(opts: { destroyIdle?: boolean } = {}): Promise<void> {
    this.shutdownPromise ??= (async () => {
      this.core.close()
      for (const t of this.timers) clearInterval(t)
      await this.warm.settled()
      await Promise.allSettled(this.binds.values())
      if (opts.destroyIdle) await this.warm.destroyAll()
      await this.core.handles.closeAll()
    })()
    return this.shutdownPromise
  }

  stats(): PoolStats {
    return this.core.stats.snapshot({ leases: this.leases.size, handles: this.core.handles.size })
  }

  private async acquireEphemeral(t: Target, dl: Deadline): Promise<Lease> {
    const got = await obtain(this.core, this.warm, t, dl)
    this.core.stats.countAcquire(got.hit ? 'warm' : 'created')
    const live: LiveLease = {
      leaseId: got.leaseId,
      ref: got.ref,
      slots: got.slots,
      idleTtlMs: t.profile.idleTtlMs,
    }
    return this.leases.open(t.key, got.sandbox, got.hit, live)
  }

  private async acquireBound(t: Target, session: string, dl: Deadline): Promise<Lease> {
    const { store, opts } = this.core
    let outcome: AcquireOutcome = 'existing'
    for (let pollMs = opts.lockPollMs; ;) {
      dl.check()
      // A bind already running in this process: wait for it, then use its binding.
      const running = this.binds.get(session)
      if (running) {
        outcome = (await dl.race(running)).outcome
        continue
      }
      const leaseId = randomUUID()
      const now = Date.now()
      const lock = { name: `bind:${session}`, token: `${opts.instanceId}:${leaseId}`, ttlMs: opts.lockTtlMs }
      const lease = { leaseId, expiresAt: now + opts.leaseTtlMs }
      const idleDeadline = now + t.profile.idleTtlMs
      const r = await store.useOrLock(session, lease, idleDeadline, lock)
      if ('binding' in r) {
        const b = r.binding
        let used = false
        try {
          const elsewhere = foreignEngine(this.core, b.ref)
          if (elsewhere) throw elsewhere
          const sandbox = await this.core.handles.use(b.ref, t.provider, dl.signal)
          used = true
          // A cached handle may be to a sandbox that died since its last call: find out now, while
          // nothing has run on it, so this call can go to a fresh sandbox instead of failing.
          await sandbox.ready?.({ signal: dl.signal })
          this.core.stats.countAcquire(outcome)
          const live: LiveLease = {
            leaseId,
            ref: b.ref,
            slots: b.slots,
            session,
            idleTtlMs: t.profile.idleTtlMs,
            idleDeadline,
          }
          return this.leases.open(t.key, sandbox, outcome !== 'created', live, keptNotice(t, r.replaced))
        } catch (err) {
          if (used) this.core.handles.unuse(b.ref.id)
          await store.endLease(b.ref.id, leaseId)
          if (!isLost(err)) throw err
          // The bound sandbox is gone: unbind it (unless someone already did), note that its files
          // are lost, and bind a fresh one.
          // The provider's advice to destroy and recreate is what the pool is doing: not for the notice.
          const why = withoutRecreateAdvice(err instanceof Error ? err.message : String(err))
          const note = { at: Date.now(), reason: `the sandbox was found gone before a call: ${why}` }
          const unbound = await store.unbind(session, b.ref.id, note)
          await this.core.destroy(b.ref, b.slots, unbound ? 'lost' : undefined)
          continue
        }
      }
      if (r.lock === 'busy') {
        // Another worker is binding this session: poll until its binding appears (or its lock lapses).
        await sleep(pollMs, dl.signal)
        pollMs = Math.min(pollMs * 2, 200)
        continue
      }
      // We hold the session's lock: bind, sharing the outcome with this process's concurrent callers.
      const bind = this.bindSession(t, session, lock, dl)
      this.binds.set(session, bind)
      const forget = () => void this.binds.delete(session)
      bind.then(forget, forget)
      let result: BindResult
      try {
        result = await dl.race(bind)
      } catch (err) {
        // Given up while the bind goes on: its sandbox stays bound for later calls, drop our lease.
        bind.then(
          ({ got }) => {
            if (got)
              void this.core.background('ending an abandoned lease', () => this.abandon(t, got, session))
          },
          () => undefined,
        )
        throw err
      }
      outcome = result.outcome
      if (!result.got) continue
      this.core.stats.countAcquire(outcome)
      const { got } = result
      const live: LiveLease = {
        leaseId: got.leaseId,
        ref: got.ref,
        slots: got.slots,
        session,
        idleTtlMs: t.profile.idleTtlMs,
      }
      let replaced: SandboxReplacement | undefined
      try {
        replaced = await store.replacement(session)
      } catch (err) {
        await this.abandon(t, got, session).catch(() => undefined)
        throw err
      }
      return this.leases.open(t.key, got.sandbox, got.hit, live, keptNotice(t, replaced))
    }
  }

  /**
   * Binds a sandbox to an unbound session whose lock the caller holds; the bind releases the lock in
   * the same atomic step. The obtained sandbox's lease becomes the binder's lease.
   */
  private async bindSession(
    t: Target,
    session: string,
    lock: BindLock,
    leader: Deadline,
  ): Promise<BindResult> {
    const { store } = this.core
    // Not the caller's signal: concurrent callers share this bind, and a bound sandbox serves later calls.
    const dl = new Deadline(leader.remainingMs, [this.core.shutdownSignal], describeTarget(t), leader)
    if (leader.createAttempts !== undefined) dl.createAttempts = leader.createAttempts
    const renew = setInterval(() => {
      void this.core.background('renewing a bind lock', () =>
        store.renewLock(lock.name, lock.token, lock.ttlMs),
      )
    }, lock.ttlMs / 3)
    renew.unref()
    let unlocked = false
    try {
      const got = await obtain(this.core, this.warm, t, dl)
      let bound: boolean
      try {
        const now = Date.now()
        const binding = { ref: got.ref, tenant: t.key.tenant, slots: got.slots, boundAt: now }
        bound = await store.bind(session, binding, now + t.profile.idleTtlMs, lock)
        unlocked = true
      } catch (err) {
        this.core.handles.unuse(got.ref.id)
        await this.core.destroy(got.ref, got.slots)
        throw err
      }
      if (!bound) {
        // Our lock lapsed and another binder won: this sandbox was never used, drop it.
        this.core.handles.unuse(got.ref.id)
        await this.core.destroy(got.ref, got.slots)
        return { outcome: 'existing' }
      }
      return { outcome: got.hit ? 'warm' : 'created', got }
    } catch (err) {
      throw dl.translate(err)
    } finally {
      clearInterval(renew)
      dl.dispose()
      if (!unlocked)
        await store.unlock(lock.name, lock.token).catch((e: unknown) => this.core.report(e, 'unlocking'))
    }
  }

  /** Ends the lease of a bind whose caller gave up (the binding stays). */
  private async abandon(t: Target, got: Obtained, session: string): Promise<void> {
    this.core.handles.unuse(got.ref.id)
    const idleDeadline = Date.now() + t.profile.idleTtlMs
    await this.core.store.endLease(got.ref.id, got.leaseId, { session, idleDeadline })
  }

  /** A periodic, non-overlapping, unref'd background task; `ms` 0 disables it. */
  private every(ms: number, context: string, fn: () => Promise<unknown>): void {
    if (ms <= 0) return
    let running = false
    const timer = setInterval(() => {
      if (running || this.core.closed) return
      running = true
      void this.core.background(context, fn).finally(() => (running = false))
    }, ms)
    timer.unref()
    this.timers.push(timer)
  }
}
