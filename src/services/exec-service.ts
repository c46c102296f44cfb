import { setTimeout as sleep } from 'node:timers/promises'
import { AppError } from '../errors.js'
import type { ExecInput, ExecService, JobEvent, JobView } from './index.js'
import type { ExecJob, ExecJobResult } from '../queue/schemas.js'
import { chunkBytes, OutputCursor } from '../queue/output-log.js'
import type { LoggedChunk } from '../queue/schemas.js'
import { notAccepted } from '../queue/submit-or-get.js'
import type { AlongsideWrite, JobInfo, JobQueue, SubmitOrGetOutcome } from '../queue/types.js'
import type { QueueRouteExecutor } from '../routing/queue-route-executor.js'
import { jobView, unknownJobView, vanishedJobView } from './job-view.js'
import { sessionRecordAlongside } from './session-directory.js'
import type { SessionDirectory } from './session-directory.js'
import { type TenantJobLimiter, tenantJobsExceeded } from './tenant-jobs.js'
import type { SessionPool } from '../sessions/types.js'
import { sessionKeyOf } from '../worker/exec-processor.js'

/** After a wait that got no result, the job's current state is read for up to this long more (ms). */
const FINAL_READ_GRACE_MS = 5_000
/** How long an event stream tries to read a job's retained output while Redis is away (ms). */
const REPLAY_RETRY_MS = 10_000
/** How long past its timeout a job holds its tenant slot when its end is never seen (ms). */
const SLOT_MARGIN_MS = 15 * 60_000
/** How long a job this process added is remembered for the wait that follows its submit (ms). */
const ADDED_MEMORY_MS = 30_000

/**
 * {@link ExecService} on the job queue: every lookup checks the job's tenant (another tenant's job is
 * unknown). Once a job is accepted, a Redis outage never turns its answer into "not accepted": waits
 * ride it out until their deadline.
 */
export class QueueExecService implements ExecService {
  constructor(
    private readonly queue: JobQueue,
    private readonly router: QueueRouteExecutor,
    private readonly directory: SessionDirectory,
    private readonly limiter?: TenantJobLimiter,
    /** Refuses (429 QUOTA_EXCEEDED) a job whose new sandbox would not fit, before it is queued. */
    private readonly bounds?: Pick<SessionPool, 'admit'>,
  ) {}

  async submit(tenant: string, input: ExecInput, opts: { callId: string }): Promise<JobView> {
    const job = this.router.buildJob({
      providerId: input.provider,
      profile: input.profile,
      command: input.command,
      callId: opts.callId,
      toolName: 'exec',
      tenant,
      ...(input.sessionId ? { sessionId: input.sessionId } : {}),
      ...(input.cwd ? { cwd: input.cwd } : {}),
      ...(input.env ? { env: input.env } : {}),
      ...(input.stdin !== undefined ? { stdin: input.stdin } : {}),
      ...(input.timeoutMs !== undefined ? { timeoutMs: input.timeoutMs } : {}),
      ...(input.idempotent !== undefined ? { idempotent: input.idempotent } : {}),
      ...(input.shell !== undefined ? { shell: input.shell } : {}),
    })
    const target = { provider: input.provider, profile: input.profile }
    // The session's record goes with the submission, whether the job is new or not.
    const alongside = sessionRecordAlongside(this.directory, tenant, job.sessionId, target)
    // A new job must fit: the bounds (its sandbox), then one of the tenant's job slots (counted by
    // the queue's add for the whole fleet when it can, else here for this process).
    const fleetSlots = this.limiter && this.queue.countsTenantJobs === true
    let release: (() => void) | undefined
    try {
      await this.bounds?.admit(sessionKeyOf(job))
      if (!fleetSlots) release = this.limiter?.take(tenant)
    } catch (refusal) {
      return this.refused(tenant, job, alongside, refusal)
    }
    let outcome: SubmitOrGetOutcome
    try {
      outcome = await this.queue.submitOrGet(job, {
        ...(alongside ? { alongside } : {}),
        ...(fleetSlots && this.limiter
          ? { tenantJobs: { cap: this.limiter.max, holdMs: job.timeoutMs + SLOT_MARGIN_MS } }
          : {}),
      })
    } catch (err) {
      release?.()
      throw notAccepted(err, job.jobId)
    }
    // Past the fleet-wide cap: nothing was added (an existing id would have been answered).
    if (outcome.kind === 'over-cap') throw tenantJobsExceeded(tenant, outcome.count, this.limiter?.max ?? 0)
    if (outcome.kind === 'exists' && outcome.info) {
      release?.()
      return this.resubmitted(tenant, job, outcome.info)
    }
    if (release) {
      // The slot is held until the job is over, whoever waits for it.
      this.queue
        .wait(job.jobId, { timeoutMs: job.timeoutMs + SLOT_MARGIN_MS })
        .catch(() => undefined)
        .finally(release)
    }
    // Accepted: from here on the answer is the job, even if Redis went away just now. A job this call
    // added is queued (its id hashes the tenant, so it is this tenant's): no read.
    this.remember(job)
    return jobView({ job, state: 'waiting' })
  }

  /**
   * A submission the bounds or the tenant's job slots refused: a job already submitted under its id
   * is answered as it is (whatever the bounds say now), with the session's record written and the
   * job read once more, as it is after the record; else the refusal stands.
   */
  private async refused(
    tenant: string,
    job: ExecJob,
    alongside: AlongsideWrite | undefined,
    refusal: unknown,
  ): Promise<JobView> {
    const existing = await this.queue.inspect(job.jobId).catch((err: unknown) => {
      throw notAccepted(err, job.jobId)
    })
    if (!existing) throw refusal
    sameRequestOrConflict(existing.job, job)
    await alongside?.write()
    const info = await this.queue.inspect(job.jobId).catch(() => undefined)
    return this.ownView(tenant, info ?? { job: existing.job, state: 'waiting' })
  }

  /**
   * The answer to a resubmission (an Idempotency-Key used before): the job as it is, or 409 for a
   * different request under the same key.
   */
  private resubmitted(tenant: string, job: ExecJob, existing: JobInfo): JobView {
    sameRequestOrConflict(existing.job, job)
    return this.ownView(tenant, existing)
  }

  private ownView(tenant: string, info: JobInfo): JobView {
    if (info.job.tenant !== tenant) throw new AppError('CONFLICT', 'job id collision; retry with another key')
    return jobView(info)
  }

  /**
   * Jobs this process just added, by id, for the caller's wait that follows at once: it then needs no
   * lookup of the job (it is the tenant's and unfinished when added; the wait checks for the result).
   */
  private readonly added = new Map<string, ExecJob>()

  private remember(job: ExecJob): void {
    this.added.set(job.jobId, job)
    setTimeout(() => this.added.delete(job.jobId), ADDED_MEMORY_MS).unref()
  }

  async list(tenant: string, filter: { sessionId?: string; limit: number }): Promise<JobView[]> {
    const infos = await this.queue.list(tenant, filter)
    return infos.filter((i) => i.job.tenant === tenant).map(jobView)
  }

  async get(tenant: string, id: string): Promise<JobView | undefined> {
    const info = await this.owned(tenant, id)
    return info ? jobView(info) : undefined
  }

  /**
   * Waits for the job's end until `timeoutMs`. Redis outages are ridden out until then (lookups are
   * retried); after a wait without a result the job's current state is read once more. Rejects with
   * QUEUE_UNAVAILABLE only when Redis stayed away; `undefined` when the job is not (or no longer) the
   * tenant's.
   */
  async wait(
    tenant: string,
    id: string,
    opts: { timeoutMs: number; signal?: AbortSignal },
  ): Promise<JobView | undefined> {
    const deadline = Date.now() + opts.timeoutMs
    const { signal } = opts
    const stayedAway = (err: unknown): unknown =>
      err instanceof AppError && err.code === 'QUEUE_UNAVAILABLE'
        ? new AppError(
            'QUEUE_UNAVAILABLE',
            `Redis stayed unreachable until the wait (${opts.timeoutMs} ms) ended`,
            {
              retryable: true,
              cause: err,
            },
          )
        : err
    const added = this.added.get(id)
    this.added.delete(id)
    const info: JobInfo | undefined =
      added && added.tenant === tenant
        ? { job: added, state: 'waiting' }
        : await this.retrying(() => this.owned(tenant, id), deadline, signal).catch((err: unknown) => {
            throw stayedAway(err)
          })
    if (!info) return undefined
    if (info.result) return jobView(info)
    let result: ExecJobResult | undefined
    try {
      result = await this.queue.wait(id, {
        timeoutMs: Math.max(1, deadline - Date.now()),
        ...(signal ? { signal } : {}),
      })
    } catch (err) {
      // The job's record is gone (lost by Redis, or past retention).
      if (err instanceof AppError && err.code === 'NOT_FOUND') return undefined
      // A wait that ran out is not a failure of the job: answer with where it is now. One that ended
      // early without an abort (the queue closed under it) is reported as it is.
      const ranOut =
        err instanceof AppError && err.code === 'QUEUE_UNAVAILABLE' && Date.now() >= deadline - 50
      if (!ranOut && !signal?.aborted) throw err
    }
    if (result) return jobView({ job: info.job, state: 'finished', result })
    if (signal?.aborted) return jobView(info)
    return this.retrying(() => this.get(tenant, id), Date.now() + FINAL_READ_GRACE_MS, signal).catch(
      (err: unknown) => {
        throw stayedAway(err)
      },
    )
  }

  /** Runs `read`, retrying while Redis is unreachable (QUEUE_UNAVAILABLE) until `deadline` (epoch ms). */
  private async retrying<T>(read: () => Promise<T>, deadline: number, signal?: AbortSignal): Promise<T> {
    for (let delayMs = 100; ; delayMs = Math.min(delayMs * 2, 1_000)) {
      try {
        return await read()
      } catch (err) {
        const unavailable = err instanceof AppError && err.code === 'QUEUE_UNAVAILABLE'
        if (!unavailable || signal?.aborted || Date.now() + delayMs > deadline) throw err
        await sleep(delayMs, undefined, signal ? { signal } : {}).catch(() => undefined)
      }
    }
  }

  async cancel(tenant: string, id: string): Promise<JobView | undefined> {
    const info = await this.owned(tenant, id)
    if (!info) return undefined
    if (!info.result) await this.queue.cancel(id, 'cancelled over the API')
    return this.get(tenant, id)
  }

  async events(
    tenant: string,
    id: string,
    signal: AbortSignal,
    opts: { after?: number } = {},
  ): Promise<AsyncIterable<JobEvent> | undefined> {
    const info = await this.owned(tenant, id)
    if (!info) return undefined
    const pending: JobEvent[] = []
    let wake: (() => void) | undefined
    let done = false
    const push = (e: JobEvent): void => {
      pending.push(e)
      wake?.()
    }
    const cursor = new OutputCursor(opts.after ?? 0, (d) =>
      push(
        d.kind === 'chunk'
          ? { type: d.chunk.stream, data: d.chunk.data, id: d.chunk.offset }
          : { type: 'missed', bytes: d.bytes, id: d.offset },
      ),
    )
    // The retained output, read again while Redis is briefly away (a connection still reconnecting
    // after a restart): read once and dropped on failure, the chunks whose live message was missed
    // were silently absent from the stream.
    const replay = async (): Promise<void> => {
      const chunks = await this.retrying(
        () => this.queue.readOutput(id),
        Date.now() + REPLAY_RETRY_MS,
        signal,
      ).catch(() => [])
      for (const c of chunks) cursor.push(c)
    }
    // Live chunks wait while the retained ones are replayed; the cursor drops what both carry. A live
    // chunk that leaves a gap (a message published before the subscription was active again after
    // a Redis restart) waits too while the log is read again: the log holds every chunk whose
    // message went out (one script writes both), so the gap is filled unless the log no longer
    // retains it, and only then is it reported as `missed`.
    let held: LoggedChunk[] | undefined = []
    const flush = (): void => {
      const chunks = held ?? []
      held = undefined
      for (const c of chunks) cursor.push(c)
    }
    const live = (c: LoggedChunk): void => {
      if (held) {
        held.push(c)
        return
      }
      if (c.offset - chunkBytes(c.data) <= cursor.offset) return cursor.push(c)
      held = [c]
      void replay().finally(flush)
    }
    const off = await this.queue.subscribeOutput(id, live)
    await replay()
    flush()
    const finish = async (): Promise<void> => {
      try {
        const view = await this.waitForStream(tenant, id, signal)
        if (signal.aborted) return
        // Chunks whose pub/sub message was lost are in the log: deliver them before the result.
        if (!(view instanceof Error)) await replay()
        // A job that vanished while streamed (lost by Redis) still ends its stream with a result, and
        // so does one whose state could not be read: a stream never just stops.
        push({
          type: 'result',
          job:
            view instanceof Error
              ? unknownJobView(jobView(info), view)
              : (view ?? vanishedJobView(jobView(info))),
        })
      } finally {
        done = true
        wake?.()
        await off()
      }
    }
    const finishing = finish()
    return {
      async *[Symbol.asyncIterator]() {
        while (true) {
          const next = pending.shift()
          if (next) {
            yield next
            if (next.type === 'result') break
            continue
          }
          if (done || signal.aborted) break
          await new Promise<void>((r) => (wake = r))
          wake = undefined
        }
        await finishing.catch(() => undefined)
      },
    }
  }

  /**
   * The wait behind an event stream: it outlasts Redis outages (a wait that the queue ended early
   * because Redis went away is started again) and answers an error it cannot get past instead of
   * throwing, so that the stream ends with a `result` event.
   */
  private async waitForStream(
    tenant: string,
    id: string,
    signal: AbortSignal,
  ): Promise<JobView | undefined | Error> {
    for (let delayMs = 100; ; delayMs = Math.min(delayMs * 2, 1_000)) {
      try {
        return await this.wait(tenant, id, { timeoutMs: 24 * 3600_000, signal })
      } catch (err) {
        const unavailable = err instanceof AppError && err.code === 'QUEUE_UNAVAILABLE'
        if (!unavailable || signal.aborted) return err instanceof Error ? err : new Error(String(err))
        await sleep(delayMs, undefined, { signal }).catch(() => undefined)
      }
    }
  }

  private async owned(tenant: string, id: string): Promise<JobInfo | undefined> {
    const info = await this.queue.inspect(id)
    return info && info.job.tenant === tenant ? info : undefined
  }
}

/** Whether a resubmission asks for the same thing as the stored job (what the caller sent, not timestamps). */
function sameRequest(a: ExecJob, b: ExecJob): boolean {
  return (
    a.tenant === b.tenant &&
    a.command === b.command &&
    a.providerId === b.providerId &&
    a.profile === b.profile &&
    a.sessionId === b.sessionId &&
    a.cwd === b.cwd &&
    a.stdin === b.stdin &&
    a.shell === b.shell &&
    JSON.stringify(a.env ?? {}) === JSON.stringify(b.env ?? {})
  )
}

/** Throws 409 CONFLICT when a resubmission under the stored job's key asks for something else. */
function sameRequestOrConflict(stored: ExecJob, job: ExecJob): void {
  if (sameRequest(stored, job)) return
  throw new AppError(
    'CONFLICT',
    `Idempotency-Key already used for a different request (job ${job.jobId}); use a new key for a new command`,
  )
}
