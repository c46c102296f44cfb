/** A limiter's answer: pass, or how long until a request may pass (for `Retry-After`). */
export type RateVerdict = { ok: true } | { ok: false; retryAfterMs: number }

/** Admits requests per key (the tenant); may ask another process (the fleet's Redis) first. */
export interface RequestLimiter {
  take(key: string): RateVerdict | Promise<RateVerdict>
}

/**
 * Per-key token buckets, in this process: `ratePerSecond` tokens refill continuously up to `burst`. `take` answers
 * whether a request may pass and, if not, how long until one may (for `Retry-After`).
 */
export class RateLimiter implements RequestLimiter {
  private readonly buckets = new Map<string, { tokens: number; at: number }>()

  constructor(
    private readonly ratePerSecond: number,
    private readonly burst: number = Math.max(1, Math.ceil(ratePerSecond * 2)),
    private readonly now: () => number = () => performance.now(),
  ) {}

  take(key: string): RateVerdict {
    const t = this.now()
    const b = this.buckets.get(key) ?? { tokens: this.burst, at: t }
    b.tokens = Math.min(this.burst, b.tokens + ((t - b.at) / 1000) * this.ratePerSecond)
    b.at = t
    this.buckets.set(key, b)
    if (b.tokens >= 1) {
      b.tokens -= 1
      return { ok: true }
    }
    return { ok: false, retryAfterMs: Math.ceil(((1 - b.tokens) / this.ratePerSecond) * 1000) }
  }
}
