import { AppError } from '../errors.js'

function describe(err: unknown): string {
  return err instanceof Error ? err.message : String(err)
}

/**
 * The deadline of one acquire: a signal that aborts on timeout, on the caller's signal or on pool
 * shutdown, and the error to report for each. Keeps the last underlying error so a timeout says
 * what kept failing.
 */
export class Deadline {
  readonly signal: AbortSignal
  readonly expiresAt: number
  private last: unknown
  /** Creates to try before giving up, when the caller asked for fewer than the pool's default. */
  createAttempts?: number
  private readonly timeout = new AbortController()
  private readonly timer: NodeJS.Timeout

  /**
   * @param reportTo another deadline that also wants {@link lastError} (the caller waiting on a
   *   shared bind times out on its own deadline but should still name the bind's last failure)
   */
  constructor(
    readonly timeoutMs: number,
    signals: ReadonlyArray<AbortSignal | undefined>,
    private readonly what: string,
    private readonly reportTo?: Deadline,
  ) {
    this.expiresAt = Date.now() + timeoutMs
    this.timer = setTimeout(() => this.timeout.abort(), timeoutMs)
    this.timer.unref()
    const all = [this.timeout.signal, ...signals.filter((s): s is AbortSignal => s !== undefined)]
    this.signal = AbortSignal.any(all)
  }

  /** The most recent failure seen while trying (create error, full pool), for the timeout message. */
  get lastError(): unknown {
    return this.last
  }

  set lastError(err: unknown) {
    this.last = err
    if (this.reportTo) this.reportTo.lastError = err
  }

  get remainingMs(): number {
    return Math.max(0, this.expiresAt - Date.now())
  }

  /** Throws {@link error} when the deadline has passed or the acquire was cancelled. */
  check(): void {
    if (this.signal.aborted) throw this.error()
  }

  /** The error an aborted acquire reports: `ACQUIRE_TIMEOUT` naming the last failure, or the abort reason. */
  error(): unknown {
    if (!this.timeout.signal.aborted) return this.signal.reason
    const last = this.lastError === undefined ? '' : `; last error: ${describe(this.lastError)}`
    return new AppError(
      'ACQUIRE_TIMEOUT',
      `no sandbox for ${this.what} within ${this.timeoutMs} ms${last}. ` +
        `Check the provider, or raise the acquire timeout (timeoutMs / acquireTimeoutMs).`,
      { retryable: true, cause: this.lastError },
    )
  }

  /** Maps an error thrown while the deadline was aborting to {@link error}; others pass through. */
  translate(err: unknown): unknown {
    return this.signal.aborted ? this.error() : err
  }

  /** Waits for `p`, or rejects with {@link error} when the deadline aborts first. */
  race<T>(p: Promise<T>): Promise<T> {
    if (this.signal.aborted) return Promise.reject(this.error() as Error)
    return new Promise<T>((resolve, reject) => {
      const onAbort = () => reject(this.error() as Error)
      this.signal.addEventListener('abort', onAbort, { once: true })
      void p.then(resolve, reject).finally(() => this.signal.removeEventListener('abort', onAbort))
    })
  }

  dispose(): void {
    clearTimeout(this.timer)
  }
}
