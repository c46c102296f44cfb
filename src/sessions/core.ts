import { performance } from 'node:perf_hooks'
import { AppError } from '../errors.js'
import type { ResolvedProfile } from '../sandbox/profiles.js'
import type { ProviderResolver } from '../sandbox/resolver.js'
import type { Labels, Sandbox, SandboxProvider, SandboxRef } from '../sandbox/types.js'
import { HandleCache } from './handles.js'
import { poolKey, sessionHash } from './keys.js'
import type { ResolvedSessionPoolOptions } from './options.js'
import { RecentlyBound } from './recently-bound.js'
import { PoolCounters } from './stats.js'
import type { EvictionReason } from './stats.js'
import type { SessionStore } from './store/types.js'
import type { SessionKey } from './types.js'

/** Reports errors of background work (refill, eviction, heartbeat, reaper) and of destroys. */
export type PoolErrorHandler = (err: unknown, context: string) => void

/** A session key resolved against the registry. */
export interface Target {
  readonly key: SessionKey
  readonly provider: SandboxProvider
  readonly profile: ResolvedProfile
  /** `provider/profile`: the warm pool and the `pool:` slot set. */
  readonly pool: string
  /** Hash of the key; absent for ephemeral calls. */
  readonly session?: string
}

/** State and operations shared by the pool's parts (binder, warm pools, maintenance). */
export class PoolCore {
  readonly stats = new PoolCounters()
  readonly handles = new HandleCache()
  /** Sessions seen bound just now: admitted without a store read (recently-bound.ts). */
  readonly recentlyBound = new RecentlyBound()
  /** Providers this process used, for `reap()` when the registry cannot list its ids. */
  readonly usedProviders = new Set<string>()
  private readonly shutdown = new AbortController()

  constructor(
    readonly opts: ResolvedSessionPoolOptions & { instanceId: string },
    readonly providers: ProviderResolver,
    readonly store: SessionStore,
    private readonly onError: PoolErrorHandler,
  ) {}

  /** Aborts when the pool shuts down. */
  get shutdownSignal(): AbortSignal {
    return this.shutdown.signal
  }

  get closed(): boolean {
    return this.shutdown.signal.aborted
  }

  close(): void {
    this.shutdown.abort(new AppError('UNAVAILABLE', 'the session pool is shut down; create a new pool'))
  }

  /** Resolves a key's provider and profile (registry errors list the known ones). */
  target(key: SessionKey): Target {
    if (typeof key.tenant !== 'string' || key.tenant === '') {
      throw new AppError('BAD_REQUEST', 'session key needs a non-empty tenant')
    }
    if (key.sessionId === '')
      throw new AppError(
        'BAD_REQUEST',
        'sessionId must be non-empty when given; omit it for an ephemeral sandbox',
      )
    const { provider, profile } = this.providers.resolve(key.providerId, key.profile)
    if (profile.provider !== key.providerId) {
      throw new AppError(
        'BAD_REQUEST',
        `profile '${key.profile}' targets provider '${profile.provider}', not '${key.providerId}'; ` +
          `use providerId '${profile.provider}' or a profile of '${key.providerId}'`,
      )
    }
    this.usedProviders.add(provider.id)
    const pool = poolKey(key.providerId, key.profile, this.opts.providerEngines[key.providerId])
    return key.sessionId === undefined
      ? { key, provider, profile, pool }
      : { key, provider, profile, pool, session: sessionHash(key) }
  }

  /** One provider create, timed and counted; a sandbox created after `signal` aborted is destroyed. */
  async create(
    t: Pick<Target, 'provider' | 'profile'>,
    labels: Labels,
    signal: AbortSignal,
  ): Promise<Sandbox> {
    const t0 = performance.now()
    let sandbox: Sandbox
    try {
      sandbox = await t.provider.create(t.profile, { labels, signal })
    } catch (err) {
      this.stats.createFailures++
      throw err
    }
    this.stats.observeCreate(performance.now() - t0)
    if (signal.aborted) {
      // The provider finished despite the abort: nobody will use this sandbox.
      void this.destroy(sandbox.ref, [], undefined, sandbox)
      throw signal.reason
    }
    return sandbox
  }

  /**
   * Destroys a sandbox the pool no longer wants: closes its handle, forgets it in the store (slots,
   * leases), then asks the provider. A failed destroy is reported; `reap()` retries it later.
   */
  async destroy(
    ref: SandboxRef,
    slots: readonly string[],
    reason?: EvictionReason,
    handle?: Sandbox,
    /** Called once the sandbox no longer counts against any bound (its slots are free). */
    onForgotten?: () => void,
  ): Promise<void> {
    if (reason) this.stats.evictions[reason]++
    if (handle) await handle.close().catch(() => undefined)
    await this.handles.drop(ref.id)
    try {
      await this.store.forget(ref.id, slots)
    } catch (err) {
      this.report(err, `forgetting sandbox ${ref.id} in the session store`)
    }
    onForgotten?.()
    try {
      await this.providers.get(ref.providerId).destroy(ref)
    } catch (err) {
      this.stats.destroyFailures++
      this.report(err, `destroying sandbox ${ref.id} (${ref.providerId})`)
    }
  }

  /** Reports a background error without throwing. */
  report(err: unknown, context: string): void {
    this.stats.backgroundErrors++
    try {
      this.onError(err, context)
    } catch {
      // An error handler that throws must not break the pool.
    }
  }

  /** Runs background work, reporting its failure; never rejects. */
  background(context: string, fn: () => Promise<unknown>): Promise<void> {
    return fn().then(
      () => undefined,
      (err: unknown) => {
        if (!this.closed) this.report(err, context)
      },
    )
  }
}

/** Whether an error means the sandbox is gone (so the binding must go too). */
export function isLost(err: unknown): boolean {
  return err instanceof AppError && err.code === 'SANDBOX_LOST'
}

/** Whether retrying a failed create may help: `AppError.retryable`, and unknown errors are assumed transient. */
export function isRetryable(err: unknown): boolean {
  return err instanceof AppError ? err.retryable : true
}

/** Short description of a target for messages. */
export function describeTarget(t: Pick<Target, 'key'>): string {
  return `provider '${t.key.providerId}', profile '${t.key.profile}'`
}
