import { AppError } from '../errors.js'

/**
 * Per-tenant cap on jobs queued or running through this API process (config
 * `quotas.maxConcurrentJobs`). Over the cap a submit is refused with `QUOTA_EXCEEDED` (HTTP 429).
 * The count is per process: N API replicas allow up to N × the cap.
 */
export class TenantJobLimiter {
  private readonly active = new Map<string, number>()

  constructor(private readonly max: number) {}

  /** Takes a slot or throws; call the returned function once when the job is over. */
  take(tenant: string): () => void {
    const n = this.active.get(tenant) ?? 0
    if (n >= this.max) {
      throw new AppError(
        'QUOTA_EXCEEDED',
        `tenant ${tenant} has ${n} jobs queued or running (quota ${this.max}); wait for some to finish or raise quotas.maxConcurrentJobs`,
        { retryable: true },
      )
    }
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
