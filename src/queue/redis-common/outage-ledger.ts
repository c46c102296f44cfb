/**
 * @module
 * What one BullMQ consumer remembers across Redis outages, so that a job the stalled checker hands
 * back after an outage is neither run twice nor judged lost when it comes back to this worker.
 */
import type { JobResult } from '../schemas.js'
import type { JobFence } from '../types.js'

/** How long a result an outage touched is kept for a redelivery to this worker (ms). */
export const KEEP_RESULT_MS = 10 * 60_000
/**
 * At most this many results (counting running attempts) and unstarted marks are kept: past it the
 * oldest result goes first, and the unstarted marks are cleared.
 */
export const MAX_KEPT_RESULTS = 1_000

/** The part of the fence client the ledger watches: its connection drops and its state. */
export interface WatchedClient {
  /** ioredis' connection status; `'ready'` while connected. */
  readonly status: string
  on(event: 'close', listener: () => void): unknown
  off(event: 'close', listener: () => void): unknown
}

/** Options of {@link OutageLedger}. */
export interface OutageLedgerOptions {
  /** @default KEEP_RESULT_MS */
  keepResultMs?: number
  /** @default MAX_KEPT_RESULTS */
  maxKeptResults?: number
}

/** One attempt of a job on this worker, from {@link OutageLedger.track} to {@link TrackedAttempt.end}. */
export interface TrackedAttempt {
  /**
   * Whether a Redis outage may have touched the attempt: the fence client dropped its connection since
   * the attempt began, or is not connected now. A result sent without waiting may then not have landed.
   */
  outageTouched(): boolean
  /** Keeps `result` for a redelivery to this worker once the attempt ends (call when {@link outageTouched}). */
  keep(result: JobResult): void
  /** Ends the attempt (in a `finally`): keeps its result if {@link keep} was called, else forgets the job. */
  end(): void
}

/**
 * The Redis-outage bookkeeping of one BullMQ consumer:
 * - **results** of attempts an outage touched, by job id, kept {@link KEEP_RESULT_MS} (at most
 *   {@link MAX_KEPT_RESULTS}): after an outage the stalled checker can hand such a job back, and a
 *   redelivery to this worker then takes the real result instead of judging the attempt lost;
 * - **unstarted** jobs, whose last attempt here failed its fence `begin` (Redis went away under the
 *   call): that attempt did not start the command, whatever the fence record says;
 * - **fence drops**, the fence client's connection losses, which tell whether an attempt spanned one;
 * - the **attempts in flight**, and waiters for the moment there are none.
 */
export class OutageLedger {
  private readonly keepResultMs: number
  private readonly maxKept: number
  /** Still-running attempts (pending) and kept results, by job id. */
  private readonly attempts = new Map<string, Promise<JobResult | undefined>>()
  private readonly unstarted = new Set<string>()
  private readonly idleWaiters: (() => void)[] = []
  private drops = 0
  private running = 0
  private readonly onDrop = (): void => {
    this.drops += 1
  }

  /** Starts counting the connection drops of `fenceClient` (until {@link dispose}). */
  constructor(
    private readonly fenceClient: WatchedClient,
    opts: OutageLedgerOptions = {},
  ) {
    this.keepResultMs = opts.keepResultMs ?? KEEP_RESULT_MS
    this.maxKept = opts.maxKeptResults ?? MAX_KEPT_RESULTS
    fenceClient.on('close', this.onDrop)
  }

  /** Attempts in flight ({@link track}ed and not yet ended). */
  get active(): number {
    return this.running
  }

  /** Resolves once no attempt is in flight (at once when none is). */
  whenIdle(): Promise<void> {
    return this.running === 0 ? Promise.resolve() : new Promise((resolve) => this.idleWaiters.push(resolve))
  }

  /**
   * An earlier attempt of `jobId` on this worker, if one is running or left a result: `undefined` at
   * once when there is none; else a promise of its result (`undefined` when it left none). A result
   * is handed out once: it is forgotten as it is returned.
   */
  takeResult(jobId: string): Promise<JobResult | undefined> | undefined {
    const earlier = this.attempts.get(jobId)
    if (!earlier) return undefined
    return earlier.then((result) => {
      if (result) this.attempts.delete(jobId)
      return result
    })
  }

  /**
   * Whether the last attempt of `jobId` here failed its fence `begin`; clears the mark. Such a job may
   * run its command on this worker again (the caller fences it as idempotent).
   */
  takeUnstarted(jobId: string): boolean {
    const known = this.unstarted.has(jobId)
    this.unstarted.delete(jobId)
    return known
  }

  /** Marks `jobId` unstarted (see {@link takeUnstarted}); the marks are dropped wholesale past the cap. */
  markUnstarted(jobId: string): void {
    if (this.unstarted.size >= this.maxKept) this.unstarted.clear()
    this.unstarted.add(jobId)
  }

  /** `fence` with a `begin` that marks `jobId` unstarted when it fails. */
  watchBegin(jobId: string, fence: JobFence<unknown>): JobFence<unknown> {
    return {
      ...fence,
      begin: (start) =>
        fence.begin(start).catch((err: unknown) => {
          this.markUnstarted(jobId)
          throw err
        }),
    }
  }

  /**
   * Starts an attempt of `jobId`: counts it in flight, notes the fence drops so far, and makes a
   * concurrent {@link takeResult} wait for its outcome.
   */
  track(jobId: string): TrackedAttempt {
    this.running += 1
    const dropsAtStart = this.drops
    let settle!: (r: JobResult | undefined) => void
    this.attempts.set(jobId, new Promise((resolve) => (settle = resolve)))
    let kept: JobResult | undefined
    return {
      outageTouched: () => this.drops !== dropsAtStart || this.fenceClient.status !== 'ready',
      keep: (result) => {
        kept = result
      },
      end: () => {
        if (kept) this.keepResult(jobId, Promise.resolve(kept))
        else this.attempts.delete(jobId)
        settle(kept)
        this.running -= 1
        if (this.running === 0) for (const resolve of this.idleWaiters.splice(0)) resolve()
      },
    }
  }

  /** Stops counting the fence client's drops. */
  dispose(): void {
    this.fenceClient.off('close', this.onDrop)
  }

  private keepResult(jobId: string, result: Promise<JobResult | undefined>): void {
    if (this.attempts.size >= this.maxKept) {
      const oldest = this.attempts.keys().next()
      if (!oldest.done) this.attempts.delete(oldest.value)
    }
    this.attempts.set(jobId, result)
    setTimeout(() => {
      if (this.attempts.get(jobId) === result) this.attempts.delete(jobId)
    }, this.keepResultMs).unref()
  }
}
