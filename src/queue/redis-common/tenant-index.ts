import type { Redis } from 'ioredis'

/**
 * Per-tenant (and per-session) indexes of submitted job ids in Redis, for `GET /v1/jobs`: sorted sets
 * scored by submission time, trimmed to the retention window on about one write in 16 (reads skip older
 * entries anyway; the trim only bounds the set) and expiring a retention after the last write. An id is indexed before
 * its job is added, so every accepted job is listed; an id whose job never made it (the add failed) is
 * simply not found when listed.
 */
export class TenantJobIndex {
  constructor(
    private readonly client: Redis,
    private readonly base: string,
    private readonly retentionMs: number,
  ) {}

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
    for (const key of this.keys(job.tenant, job.sessionId)) {
      pipeline.zadd(key, 'NX', job.submittedAt, job.jobId)
      if (trim) pipeline.zremrangebyscore(key, '-inf', `(${Date.now() - this.retentionMs}`)
      pipeline.pexpire(key, this.retentionMs)
    }
    const replies = await pipeline.exec()
    const failed = replies?.find(([err]) => err)
    if (failed?.[0]) throw failed[0]
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
