import type { Sandbox, SandboxRef } from '../sandbox/types.js'
import type { PoolStats } from './stats.js'

/** Identifies a sandbox session. A used sandbox is never handed to another key. */
export interface SessionKey {
  readonly tenant: string
  /** Absent: an ephemeral sandbox, destroyed after use. */
  readonly sessionId?: string
  readonly providerId: string
  readonly profile: string
}

/** How a leased call ended, so the pool knows what to do with the sandbox. */
export type LeaseOutcome =
  /** Keep the binding (or destroy, for ephemeral sandboxes). */
  | 'ok'
  /** The sandbox vanished or broke: unbind it (and destroy what is left); the next call rebinds. */
  | 'lost'

/**
 * A session's sandbox was replaced by a fresh one: everything the old one held (files, background
 * processes) is gone. Recorded by the pool and shown with every result of the session until the
 * user acknowledges it ({@link SessionPool.acknowledge}) or deletes the session.
 */
export interface SandboxReplacement {
  /** When the loss was noticed (ms since epoch). */
  readonly at: number
  /** Why, e.g. the engine's word on the old sandbox ("not running (exited, exit code 137)"). */
  readonly reason: string
  /** Always true: the new sandbox starts empty. */
  readonly filesLost: true
  /** Id of the sandbox that was lost. */
  readonly previousSandboxId: string
  /**
   * Set when the profile has a persistent workspace: `/workspace` was kept (the new sandbox mounts
   * it again); only files elsewhere and processes were lost.
   */
  readonly workspaceKept?: true
}

/** What the pool knows about a session: its sandbox (once bound) and an unacknowledged replacement. */
export interface SessionState {
  readonly sandboxId?: string
  readonly sandboxReplaced?: SandboxReplacement
}

/** The right to use a session's sandbox for one call. */
export interface Lease {
  readonly key: SessionKey
  readonly sandbox: Sandbox
  readonly ref: SandboxRef
  /** Whether the sandbox came from the warm pool or an existing binding (no create on this call). */
  readonly hit: boolean
  /** Set while the session's sandbox was replaced and the user has not acknowledged it. */
  readonly sandboxReplaced?: SandboxReplacement
  /**
   * Ends the lease. Idempotent. With `lost`, `reason` (the error's message) is recorded as the
   * session's {@link SandboxReplacement} reason.
   */
  release(outcome?: LeaseOutcome, reason?: string): Promise<void>
  /**
   * Resolves once a release no longer counts this sandbox against any bound (for an ephemeral
   * sandbox: its quota slots are free, while the provider may still be destroying it). Never rejects.
   */
  readonly freed?: Promise<void>
  /** Whether the session was deleted ({@link SessionPool.close}) while this lease was held. */
  closedMeanwhile(): Promise<boolean>
}

/** Options of {@link SessionPool.acquire}. */
export interface AcquireOptions {
  signal?: AbortSignal
  /** Give up after this long (ms) with `AppError('ACQUIRE_TIMEOUT')`; the pool default when absent. */
  timeoutMs?: number
  /**
   * Creates to try (retryable failures are retried with backoff) before the acquire fails; a routing
   * policy passes 1 for a candidate with others after it, so it fails over at once. @default the pool's `createAttempts`
   */
  createAttempts?: number
}

/**
 * Binds sessions to sandboxes: the first call of a session binds one (warm pool first, else create),
 * later calls — from any worker of the fleet — reuse it. Bindings and leases live in Redis.
 */
export interface SessionPool {
  acquire(key: SessionKey, opts?: AcquireOptions): Promise<Lease>
  /** Destroys the session's sandbox and forgets the binding (and any replacement notice). Unknown key: no-op. */
  close(key: SessionKey): Promise<void>
  /**
   * Fails fast, before a job is queued, when a new sandbox for `key` would not fit: throws
   * `QUOTA_EXCEEDED` naming the bound (tenant quota or profile cap) and how to free room. A session
   * already bound always passes. The acquire checks again atomically; this check is advisory.
   */
  admit(key: SessionKey): Promise<void>
  /** The session's sandbox id and unacknowledged replacement, if any. */
  state(key: SessionKey): Promise<SessionState>
  /** Clears the session's replacement notice; returns the notice it cleared. */
  acknowledge(key: SessionKey): Promise<SandboxReplacement | undefined>
  /** Destroys every owned sandbox without a live lease/binding. Returns how many were reaped. */
  reap(): Promise<number>
  /** Stops timers, releases handles; `destroyIdle` also destroys unbound warm sandboxes. */
  shutdown(opts?: { destroyIdle?: boolean }): Promise<void>
  /** Counters and gauges of this process's pool (hits, misses, creates, evictions, sizes). */
  stats(): PoolStats
}
