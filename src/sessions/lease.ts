import type { Sandbox, SandboxRef } from '../sandbox/types.js'
import type { Lease, LeaseOutcome, SessionKey } from './types.js'

/** What the pool remembers about a lease it handed out (renewed by its heartbeat). */
export interface LiveLease {
  readonly leaseId: string
  readonly ref: SandboxRef
  readonly slots: readonly string[]
  /** Session hash; absent for an ephemeral sandbox. */
  readonly session?: string
  readonly idleTtlMs: number
}

/** The {@link Lease} given to callers; `release` runs once, later calls return the same promise. */
export class PoolLease implements Lease {
  private released: Promise<void> | undefined

  constructor(
    readonly key: SessionKey,
    readonly sandbox: Sandbox,
    readonly hit: boolean,
    readonly live: LiveLease,
    private readonly onRelease: (live: LiveLease, outcome: LeaseOutcome) => Promise<void>,
  ) {}

  get ref(): SandboxRef {
    return this.live.ref
  }

  release(outcome: LeaseOutcome = 'ok'): Promise<void> {
    this.released ??= this.onRelease(this.live, outcome)
    return this.released
  }
}
