/** Why a sandbox was destroyed by the pool. */
export type EvictionReason =
  /** A bound sandbox unused for its profile's `idleTtlMs`, or a warm one past its TTL. */
  | 'idle'
  /** Released with outcome `lost`, or found gone on reconnect. */
  | 'lost'
  /** `close(key)`. */
  | 'closed'
  /** `shutdown({ destroyIdle: true })` (warm sandboxes). */
  | 'shutdown'

/** Where an acquire's sandbox came from: an existing binding, the warm pool, or a create. */
export type AcquireOutcome = 'existing' | 'warm' | 'created'

/** Upper bounds (ms) of the create-latency histogram buckets; the last bucket is unbounded. */
export const CREATE_LATENCY_BUCKETS_MS = [50, 100, 250, 500, 1_000, 2_500, 5_000, 10_000] as const

/** A cumulative histogram, Prometheus style: `counts[i]` observations were ≤ `bucketsMs[i]`. */
export interface LatencyHistogram {
  count: number
  sumMs: number
  bucketsMs: readonly number[]
  /** Cumulative counts per bucket, plus one last entry for `+Inf` (equals `count`). */
  counts: number[]
}

/** Counters and gauges of one pool instance (this process), as a plain object for /metrics. */
export interface PoolStats {
  /** Successful acquires. */
  acquires: number
  /** Acquires served without a create on their behalf (warm pool or existing binding). */
  hits: number
  /** Of the hits: from the warm pool. */
  warmHits: number
  /** Of the hits: an existing binding reused. */
  boundHits: number
  /** Acquires that waited for a create. */
  misses: number
  /** Sandboxes created (for sessions, ephemeral calls and the warm pools). */
  creates: number
  createFailures: number
  createLatency: LatencyHistogram
  /** Acquires that failed: timeout, create failure, quota, abort. */
  acquireFailures: number
  quotaRejections: number
  evictions: Record<EvictionReason, number>
  /** Ephemeral sandboxes destroyed on release. */
  ephemeralDestroyed: number
  /** Orphans destroyed by `reap()`. */
  reaped: number
  /** Destroy calls that failed (the reaper retries them). */
  destroyFailures: number
  /** Errors of background work (refill, eviction, heartbeat, reaper timer). */
  backgroundErrors: number
  current: {
    /** Leases held in this process. */
    leases: number
    /** Open connections to sandboxes cached in this process. */
    handles: number
    /** Acquires in progress. */
    pendingAcquires: number
    /** Warm list lengths as last seen by this process, per `provider/profile`. */
    warm: Record<string, number>
  }
}

/** Mutable counters behind {@link PoolStats}. */
export class PoolCounters {
  acquires = 0
  hits = 0
  warmHits = 0
  boundHits = 0
  misses = 0
  creates = 0
  createFailures = 0
  acquireFailures = 0
  quotaRejections = 0
  ephemeralDestroyed = 0
  reaped = 0
  destroyFailures = 0
  backgroundErrors = 0
  pendingAcquires = 0
  readonly evictions: Record<EvictionReason, number> = { idle: 0, lost: 0, closed: 0, shutdown: 0 }
  readonly warm = new Map<string, number>()
  private readonly latency = {
    count: 0,
    sumMs: 0,
    counts: new Array<number>(CREATE_LATENCY_BUCKETS_MS.length + 1).fill(0),
  }

  /** Counts a successful acquire as a hit (warm or bound) or a miss (waited for a create). */
  countAcquire(outcome: AcquireOutcome): void {
    if (outcome === 'created') {
      this.misses++
      return
    }
    this.hits++
    if (outcome === 'warm') this.warmHits++
    else this.boundHits++
  }

  observeCreate(ms: number): void {
    this.creates++
    this.latency.count++
    this.latency.sumMs += ms
    CREATE_LATENCY_BUCKETS_MS.forEach((le, i) => {
      if (ms <= le) this.latency.counts[i] = (this.latency.counts[i] ?? 0) + 1
    })
    this.latency.counts[CREATE_LATENCY_BUCKETS_MS.length] = this.latency.count
  }

  snapshot(current: { leases: number; handles: number }): PoolStats {
    return {
      acquires: this.acquires,
      hits: this.hits,
      warmHits: this.warmHits,
      boundHits: this.boundHits,
      misses: this.misses,
      creates: this.creates,
      createFailures: this.createFailures,
      createLatency: {
        count: this.latency.count,
        sumMs: this.latency.sumMs,
        bucketsMs: [...CREATE_LATENCY_BUCKETS_MS],
        counts: [...this.latency.counts],
      },
      acquireFailures: this.acquireFailures,
      quotaRejections: this.quotaRejections,
      evictions: { ...this.evictions },
      ephemeralDestroyed: this.ephemeralDestroyed,
      reaped: this.reaped,
      destroyFailures: this.destroyFailures,
      backgroundErrors: this.backgroundErrors,
      current: { ...current, pendingAcquires: this.pendingAcquires, warm: Object.fromEntries(this.warm) },
    }
  }
}
