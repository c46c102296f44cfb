/**
 * @module
 * How a Redis-backed queue's process waits for job results: one shared watch per job per process,
 * fed by the fence's `d<result>` publish on the job channel (the process's one pattern subscription)
 * and by reads of the stored result when a publish may have been missed. Driver-independent: the
 * BullMQ and the `redis` drivers differ only in how they read a finished job.
 */
import { isRedisUnreachable, queueUnavailable } from '../../redis/index.js'
import type { z } from 'zod'
import type { JobResult } from '../schemas.js'
import type { Unsubscribe, WaitOptions } from '../types.js'
import { boundedWait } from '../wait-for.js'
import type { Subscriber } from './subscriber.js'

/** What {@link JobWatches} needs from its queue. */
export interface JobWatchesDeps {
  /** The process's subscriber (started lazily; rejects while Redis is away). */
  getSubscriber(): Promise<Subscriber>
  /** The job's channel (output chunks and `d<result>`). */
  jobChannel(jobId: string): string
  /**
   * The job's result if it finished, `undefined` while it runs or waits; rejects with NOT_FOUND when
   * the job is unknown, or with the connection error while Redis is away.
   */
  finishedResult(jobId: string): Promise<JobResult | undefined>
  /** The schema of the queue's job kind's results (a published result is checked by it). */
  resultSchema: z.ZodType<JobResult>
}

type Outcome = { result: JobResult } | { error: unknown }
type Follower = (outcome: Outcome) => void

/** The shared wait of one job in one process (see {@link JobWatches.open}). */
export interface Watch {
  refs: number
  /** Resolves once the listeners are in place and the first check was sent (unless deferred). */
  readonly ready: Promise<void>
  /** Whether the job channel's subscription was confirmed when the watch opened. */
  readonly listening: boolean
  /** Reads the job's stored result (a deferred first check, or again). */
  check(): void
  /** Adds a follower; called at once when the outcome is already known. */
  follow(f: Follower): void
  unfollow(f: Follower): void
  /** Drops one reference; the last one removes the listeners. */
  release(): void
}

/** The job watches of one queue handle, and its pending waits. */
export class JobWatches {
  private readonly watches = new Map<string, Watch>()
  private readonly rechecks = new Set<() => void>()
  private readonly pendingWaits = new Set<(err: unknown) => void>()

  constructor(private readonly deps: JobWatchesDeps) {}

  /**
   * Every open watch checks its job again: call when the command connection or the pattern
   * subscription comes back (a publish made while it was away is lost, the stored result is not).
   */
  recheckAll(): void {
    for (const recheck of [...this.rechecks]) recheck()
  }

  /** Rejects every pending {@link wait} with `err` (the queue is closing). */
  rejectAll(err: unknown): void {
    for (const reject of [...this.pendingWaits]) reject(err)
  }

  /**
   * Opens (or joins) the watch of a job: the listener is in place before the job is checked, since it
   * may have finished before. While Redis is away it may not start: the watch goes on regardless (an
   * accepted job runs once Redis is back) and the job is checked again on {@link recheckAll}, and
   * once more when the wait ends without a result. With `deferCheck` the first check is left to the
   * caller (a submit that knows whether its job is new).
   */
  async open(jobId: string, opts: { deferCheck?: boolean } = {}): Promise<Watch> {
    const open = this.watches.get(jobId)
    if (open) {
      open.refs += 1
      await open.ready
      return open
    }
    const followers = new Set<Follower>()
    let outcome: Outcome | undefined
    const settle = (o: Outcome): void => {
      if (outcome) return
      outcome = o
      for (const f of [...followers]) f(o)
    }
    let offDone: Unsubscribe | undefined
    const check = (): void => {
      this.deps.finishedResult(jobId).then(
        (r) => {
          if (r) settle({ result: r })
        },
        (err: unknown) => {
          // Redis away: keep waiting; the job is checked again when the connection is back.
          if (!isRedisUnreachable(err)) settle({ error: queueUnavailable(err, `Waiting for job ${jobId}`) })
        },
      )
    }
    const recheck = check
    let stopped = false
    let listening = false
    const watch: Watch = {
      refs: 1,
      ready: (async () => {
        const sub = await this.deps.getSubscriber().catch(() => undefined)
        const onDone = (message: string): void => {
          if (message[0] !== 'd') return
          let raw: unknown
          try {
            raw = JSON.parse(message.slice(1))
          } catch {
            return
          }
          const parsed = this.deps.resultSchema.safeParse(raw)
          if (parsed.success) settle({ result: parsed.data })
        }
        offDone = await sub?.on(this.deps.jobChannel(jobId), onDone).catch(() => undefined)
        if (stopped) {
          void offDone?.().catch(() => undefined)
          return
        }
        listening = offDone !== undefined
        this.rechecks.add(recheck)
        if (!opts.deferCheck) check()
      })(),
      get listening() {
        return listening
      },
      check,
      follow(f) {
        followers.add(f)
        if (outcome) f(outcome)
      },
      unfollow(f) {
        followers.delete(f)
      },
      release: () => {
        watch.refs -= 1
        if (watch.refs > 0) return
        stopped = true
        if (this.watches.get(jobId) === watch) this.watches.delete(jobId)
        this.rechecks.delete(recheck)
        // Off the caller's path: the result is already in hand.
        offDone?.().catch(() => undefined)
      },
    }
    this.watches.set(jobId, watch)
    await watch.ready
    return watch
  }

  /**
   * Resolves with the job's result (see `JobQueue.wait`). Every wait of one job in this process shares
   * one watch (listeners, the check, rechecks): the API's answer and the tenant's job-slot release cost
   * Redis one check, not two.
   */
  async wait(jobId: string, opts: WaitOptions): Promise<JobResult> {
    opts.signal?.throwIfAborted()
    const watch = await this.open(jobId)
    try {
      return await boundedWait<JobResult>(jobId, opts, (resolve, reject) => {
        const follower: Follower = (o) => ('result' in o ? resolve(o.result) : reject(o.error))
        this.pendingWaits.add(reject)
        watch.follow(follower)
        return () => {
          watch.unfollow(follower)
          this.pendingWaits.delete(reject)
        }
      })
    } finally {
      watch.release()
    }
  }
}
