/**
 * Keeps a sandbox's server-side lifetime (E2B `timeoutMs`, killed on expiry) ahead of its use:
 * every use asks for at least the idle TTL (or a command's deadline, if longer) from now, and the
 * API is called only when the remaining lifetime falls short of that. The lifetime is set `slack`
 * beyond what is needed, so a sandbox in steady use costs one `setTimeout` call per `slack`.
 * A sandbox nobody uses is killed by E2B one idle TTL (plus at most `slack`) after its last use,
 * even if every worker died.
 */
export class Lifetime {
  private expiresAt: number
  private inflight: Promise<void> | undefined
  private readonly slackMs: number

  /**
   * @param ttlMs the idle TTL of the sandbox's profile
   * @param slackMs how far beyond the need the lifetime is set (capped at a quarter of the TTL)
   * @param set calls the API (`sandbox.setTimeout(ms)`)
   * @param expiresAt when the sandbox expires as far as the caller knows (epoch ms): the time of
   *   the create or connect call plus the lifetime it asked for ({@link Lifetime.initialFor})
   */
  constructor(
    readonly ttlMs: number,
    slackMs: number,
    private readonly set: (ms: number) => Promise<void>,
    expiresAt: number,
  ) {
    this.slackMs = Lifetime.initialFor(ttlMs, slackMs) - ttlMs
    this.expiresAt = expiresAt
  }

  /** The lifetime to ask for at create or connect for an idle TTL of `ttlMs` (ms). */
  static initialFor(ttlMs: number, slackMs: number): number {
    return ttlMs + Math.min(slackMs, Math.ceil(ttlMs / 4))
  }

  /** Ensures the sandbox lives at least `max(ttl, minMs)` from now; calls the API only when needed. */
  touch(minMs = 0): Promise<void> {
    const need = Math.max(this.ttlMs, minMs)
    if (this.expiresAt - Date.now() >= need) return Promise.resolve()
    if (this.inflight) return this.inflight.then(() => this.touch(minMs))
    const start = Date.now()
    const ms = need + this.slackMs
    this.inflight = this.set(ms)
      .then(() => {
        this.expiresAt = Math.max(this.expiresAt, start + ms)
      })
      .finally(() => {
        this.inflight = undefined
      })
    return this.inflight
  }
}
