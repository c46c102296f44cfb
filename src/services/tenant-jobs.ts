import { AppError } from '../errors.js'

/** The refusal of a job past the tenant's cap on jobs queued or running (HTTP 429). */
export function tenantJobsExceeded(tenant: string, count: number, max: number): AppError {
  return new AppError(
    'QUOTA_EXCEEDED',
    `tenant ${tenant} has ${count} jobs queued or running (quota ${max}); wait for some to finish or raise quotas.maxConcurrentJobs`,
    { retryable: true },
  )
}

/**
 * Per-tenant cap on jobs queued or running (config `quotas.maxConcurrentJobs`). Over the cap a
 * submit is refused with `QUOTA_EXCEEDED` (HTTP 429). The `redis` queue driver counts them for the
 * whole fleet in its add script (only {@link max} is used then); with the other queues this counts
 * the jobs of this process: N API replicas on `bullmq` allow up to N × the cap.
 */
export class TenantJobLimiter {
  private readonly active = new Map<string, number>()

  constructor(readonly max: number) {}

  /** Takes a slot or throws; call the returned function once when the job is over. */
  take(tenant: string): () => void {
    const n = this.active.get(tenant) ?? 0
    if (n >= this.max) throw tenantJobsExceeded(tenant, n, this.max)
    this.active.set(tenant, n + 1)
    let released = false
    return () => {
      if (released) return
      released = true
      const left = (this.active.get(tenant) ?? 1) - 1
      if (left <= 0) this.active.delete(tenant)
      else this.active.set(tenant, left)
    }
  }

  count(tenant: string): number {
    return this.active.get(tenant) ?? 0
  }
}
