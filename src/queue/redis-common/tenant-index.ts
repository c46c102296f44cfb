import type { Redis } from 'ioredis'

/**
 * Per-tenant (and per-session) indexes of submitted job ids in Redis, for `GET /v1/jobs`: sorted sets
 * scored by submission time, trimmed to the retention window on about one write in 16 (reads skip older
 * entries anyway; the trim only bounds the set). A key's TTL ({@link ttlMs}, two retentions) is
 * refreshed by each process at most once per half retention (and on every trimming write), not on
 * every write: a key outlives its newest entry by at least a retention. An id is indexed before
 * its job is added, so every accepted job is listed; an id whose job never made it (the add failed) is
 * simply not found when listed.
 */
export class TenantJobIndex {
  /** When this process last set each key's TTL (epoch ms). */
  private readonly ttlSetAt = new Map<string, number>()

  constructor(
    private readonly client: Redis,
    private readonly base: string,
    private readonly retentionMs: number,
  ) {}

  /** The TTL an index key gets when refreshed (ms): two retentions (see the class comment). */
  get ttlMs(): number {
    return 2 * this.retentionMs
  }

  /**
   * Whether `key`'s TTL is due from this write: this process did not set it within the last half
   * retention, or the write trims (so a key that lost its TTL, e.g. recreated after a Redis restart
   * lost it, gets one back). Set in the key's last refresh t' ≥ now − retention/2, the TTL runs to
   * t' + 2 retentions > now + a retention: no entry expires before its retention.
   */
  refreshDue(key: string, trims: boolean): boolean {
    const now = Date.now()
    const at = this.ttlSetAt.get(key)
    if (!trims && at !== undefined && now - at < this.retentionMs / 2) return false
    if (at === undefined && this.ttlSetAt.size >= 10_000) {
      for (const [k, t] of this.ttlSetAt) if (now - t >= this.retentionMs / 2) this.ttlSetAt.delete(k)
    }
    if (this.ttlSetAt.size < 10_000) this.ttlSetAt.set(key, now)
    return true
  }

  /** A refresh that may not have landed (its write failed): due again on the next write. */
  refreshFailed(keys: readonly string[]): void {
    for (const k of keys) this.ttlSetAt.delete(k)
  }

  /** The index keys a job of `tenant` (and `sessionId`) is listed under: the tenant's, then the session's. */
  keys(tenant: string, sessionId?: string): string[] {
    const t = encodeURIComponent(tenant)
    const keys = [`${this.base}:t:${t}`]
    if (sessionId !== undefined) keys.push(`${this.base}:s:${t}:${encodeURIComponent(sessionId)}`)
    return keys
  }

  /**
   * Indexes a job id (keeps the first submission time of a resubmitted id). Resolves `true` when the
   * id was new in the tenant's index.
   */
  async add(job: {
    jobId: string
    tenant: string
    sessionId?: string
    submittedAt: number
  }): Promise<boolean> {
    // A pipeline, not MULTI: each write stands alone, and MULTI/EXEC would be two more commands.
    const pipeline = this.client.pipeline()
    const trim = TenantJobIndex.trims(job.jobId)
    const keys = this.keys(job.tenant, job.sessionId)
    for (const key of keys) {
      pipeline.zadd(key, 'NX', job.submittedAt, job.jobId)
      if (trim) pipeline.zremrangebyscore(key, '-inf', `(${Date.now() - this.retentionMs}`)
      if (this.refreshDue(key, trim)) pipeline.pexpire(key, this.ttlMs)
    }
    const replies = await pipeline.exec().catch((err: unknown) => {
      this.refreshFailed(keys)
      throw err
    })
    const failed = replies?.find(([err]) => err)
    if (failed?.[0]) {
      this.refreshFailed(keys)
      throw failed[0]
    }
    return replies?.[0]?.[1] === 1
  }

  /** Whether adding `jobId` also trims the indexes past the retention window (about one add in 16). */
  static trims(jobId: string): boolean {
    return jobId.endsWith('0')
  }

  /** How long an index entry is kept (ms). */
  get retention(): number {
    return this.retentionMs
  }

  /** Up to `limit` job ids of the tenant (or one of its sessions), newest first. */
  async recent(tenant: string, opts: { sessionId?: string; limit: number }): Promise<string[]> {
    const keys = this.keys(tenant, opts.sessionId)
    const key = keys[keys.length - 1] as string
    const min = Date.now() - this.retentionMs
    return this.client.zrevrangebyscore(key, '+inf', min, 'LIMIT', 0, opts.limit)
  }
}

/** The tenant's job slots an add must fit (the `redis` driver's add script, src/queue/redis/scripts.ts). */
export interface TenantSlots {
  /** The tenant's slots key (`keyspace(p).tenantJobs` + tenant). */
  readonly key: string
  /** Most jobs the tenant may have queued or running. */
  readonly cap: number
  /** How long a slot is held at most when its job's end is never seen (ms): the job's timeout and a margin. */
  readonly holdMs: number
}
