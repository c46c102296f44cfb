/**
 * @module
 * The periodic work of a `redis`-driver consumer besides taking jobs: extending its heartbeat and its
 * jobs' leases, and sweeping the queue for lapsed leases (a dead worker's jobs) and dead consumers'
 * popped jobs. Every consumer sweeps; the sweep is one script, so two at once do no harm.
 */
import type { RedisJobStore } from './job-store.js'

/** Timers of one consumer: lease refresh (every half lease) and stalled sweep. */
export class StalledSweep {
  private readonly timers: NodeJS.Timeout[] = []

  constructor(
    private readonly store: RedisJobStore,
    private readonly opts: {
      readonly workerId: string
      readonly leaseMs: number
      readonly sweepIntervalMs: number
      /** The ids of the jobs the consumer runs now. */
      readonly heldJobs: () => Iterable<string>
      readonly onError: (err: unknown, context: string) => void
    },
  ) {}

  /** Registers the consumer's heartbeat (resolves once written), then starts both timers. */
  async start(): Promise<void> {
    await this.refresh()
    const every = (ms: number, fn: () => Promise<unknown>, context: string): void => {
      let busy = false
      const timer = setInterval(() => {
        if (busy) return
        busy = true
        fn()
          .catch((err: unknown) => this.opts.onError(err, context))
          .finally(() => (busy = false))
      }, ms)
      timer.unref()
      this.timers.push(timer)
    }
    every(Math.max(50, Math.floor(this.opts.leaseMs / 2)), () => this.refresh(), 'extending job leases')
    every(this.opts.sweepIntervalMs, () => this.store.sweep(), 'sweeping stalled jobs')
  }

  /** Extends the heartbeat and leases now. */
  refresh(): Promise<void> {
    return this.store.refresh(this.opts.workerId, this.opts.heldJobs())
  }

  /** Stops both timers. */
  stop(): void {
    for (const t of this.timers.splice(0)) clearInterval(t)
  }
}
