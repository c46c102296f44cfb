import type { z } from 'zod'
import type {
  ExecJob,
  ExecResult,
  FenceRecord,
  JobResult,
  LoggedChunk,
  OutputChunk,
  QueueJob,
} from './schemas.js'

/** Which backend a {@link JobQueue} runs on. */
export type QueueDriver = 'bullmq' | 'redis' | 'in-process'

/** Why a job's signal was aborted. Drivers set this as `signal.reason`. */
export type JobAbortReason =
  /** Someone cancelled the job: the command must stop; the job ends `cancelled`. */
  | { readonly kind: 'cancelled'; readonly reason: string }
  /** The consumer is shutting down past its drain deadline: the job is handed back to the queue. */
  | { readonly kind: 'shutdown' }

/**
 * What a queue carries: a kind of job, named, with the schema of its payload (checked by the worker
 * that takes a job and by views) and of the value a `completed` job carries (checked where results
 * are read). Exec jobs (`EXEC_JOBS`, the default of every driver) and agent runs are two kinds, each on
 * a queue of its own; the drivers, the fence, cancel, redelivery and the outage handling are shared.
 */
export interface JobKind<TJob extends QueueJob = ExecJob, TValue = ExecResult> {
  /** The job name drivers record (BullMQ's job name). */
  readonly name: string
  readonly payload: z.ZodType<TJob>
  readonly result: z.ZodType<JobResult<TValue>>
}

/** What the fence says about running a job's command now. */
export type FenceOutcome<TValue = ExecResult> =
  /** Run it. `previous` is set when an earlier attempt started it (idempotent routes only). */
  | { readonly kind: 'run'; readonly previous?: FenceRecord }
  /** The job already has a result (a previous attempt finished): return it. */
  | { readonly kind: 'done'; readonly result: JobResult<TValue> }
  /** The job was cancelled before it ran. */
  | { readonly kind: 'cancelled'; readonly reason: string }
  /** An earlier attempt started the command and the route is not idempotent: do not run it again. */
  | {
      readonly kind: 'fenced'
      readonly previous: FenceRecord
      readonly stdout: string
      readonly stderr: string
    }

/**
 * Per-job execution fence. A processor calls {@link JobFence.begin} immediately before the side effect
 * (the command); drivers call the rest.
 */
export interface JobFence<TValue = ExecResult> {
  /** Reads the job's records without writing (same verdict `begin` would give). */
  inspect(): Promise<FenceOutcome<TValue>>
  /** Atomically: a stored result, a cancel request or (non-idempotent) an earlier start wins; else records this start. */
  begin(start: { sandboxId?: string }): Promise<FenceOutcome<TValue>>
  /** Stores the result unless one exists; resolves with the stored one (the first finisher wins). */
  finish(result: JobResult<TValue>): Promise<JobResult<TValue>>
}

/** What a processor gets besides the job. */
export interface JobContext<TValue = ExecResult> {
  /** Aborted on cancel or on shutdown past the drain deadline; `signal.reason` is a {@link JobAbortReason}. */
  readonly signal: AbortSignal
  /** 1 on first delivery; higher after a redelivery (worker died, or the job was handed back). */
  readonly attempt: number
  /** Id of the consumer running the job (stored in fence records). */
  readonly workerId: string
  readonly fence: JobFence<TValue>
  /** Publishes live output (best effort; the final result carries the whole output). */
  publish(chunk: OutputChunk): void
}

/**
 * Runs one job. Resolve with the job's result. Rejecting while `ctx.signal` is aborted ends the job as
 * `cancelled`, or hands it back on shutdown; any other rejection ends it `failed` (code from an
 * `AppError`, else INTERNAL).
 */
export type JobProcessor<TJob extends QueueJob = ExecJob, TValue = ExecResult> = (
  job: TJob,
  ctx: JobContext<TValue>,
) => Promise<JobResult<TValue>>

/** Options of {@link JobQueue.consume}. */
export interface ConsumeOptions<TJob extends QueueJob = ExecJob, TValue = ExecResult> {
  /** Jobs run at once by this consumer. @default 8 */
  concurrency?: number
  /** Id recorded in fence records and results. @default `<hostname>-<pid>-<random>` */
  workerId?: string
  /** Errors of the consumer's own machinery (e.g. Redis connection trouble). @default ignore */
  onError?: (err: unknown, context: string) => void
  /**
   * Processor errors that hand the job back to the queue (as a Redis outage does) instead of ending it
   * `failed`: another consumer runs it, and its fence decides (Redis drivers only). @default none
   */
  handBackOn?: (err: unknown) => boolean
  /**
   * Called when a job this consumer took ends without its processor: a redelivery whose fence holds
   * a result, a cancel request or an earlier start of a non-idempotent job (`interrupted`), or one
   * the queue gave up on. For kinds that keep their own record of a job (agent runs: the run record),
   * which must end too. Errors are reported to `onError`. @default nothing
   */
  onSkipped?: (job: TJob, result: JobResult<TValue>) => Promise<void>
}

/** A running consumer of a queue. */
export interface Consumer {
  readonly workerId: string
  /** Jobs currently being processed. */
  readonly activeCount: number
  /**
   * Stops taking jobs, lets running ones finish for up to `deadlineMs`, then aborts the rest
   * (reason `shutdown`) and hands them back to the queue, where fencing decides their fate.
   */
  close(opts?: { deadlineMs?: number }): Promise<void>
}

/** Options of {@link JobQueue.wait}. */
export interface WaitOptions {
  /** Reject with `AppError('QUEUE_UNAVAILABLE')` after this long (ms). */
  timeoutMs: number
  /** Stops waiting (rejects with the abort reason); does not cancel the job. */
  signal?: AbortSignal
}

/** Where a job is, for views (HTTP, dashboards). */
export interface JobInfo<TJob extends QueueJob = ExecJob, TValue = ExecResult> {
  readonly job: TJob
  readonly state: 'waiting' | 'active' | 'finished'
  readonly result?: JobResult<TValue>
}

/** Stops a subscription. */
export type Unsubscribe = () => Promise<void>

/** A write that rides with a job's add on the queue's Redis: `HSETNX key field value`. */
export interface SetIfAbsent {
  readonly key: string
  readonly field: string
  readonly value: string
}

/**
 * A record written with a job's submission whether the job is new or not (the session's record for
 * `GET /v1/sessions`). A queue on the Redis the record lives in writes `setIfAbsent` with its add (or
 * its lookup), with no round trip of its own; any other queue calls `write` beside the add.
 */
export interface AlongsideWrite {
  /** The record as an `HSETNX` on the fleet's Redis; absent when the record does not live in Redis. */
  readonly setIfAbsent?: SetIfAbsent
  /** Writes the record by itself (an existing record is kept). */
  write(): Promise<void>
}

/** Options of {@link JobQueue.submitOrGet}. */
export interface SubmitOrGetOptions {
  /**
   * Written whether the job is new or not. A write that fails on its own never fails the submission
   * (the session's next call writes it again).
   */
  readonly alongside?: AlongsideWrite
  /**
   * The tenant's cap on jobs queued or running (`quotas.maxConcurrentJobs`). A queue that counts them
   * across the fleet ({@link JobQueue.countsTenantJobs}) answers a new job past it `over-cap` and adds
   * nothing (an existing id is still answered); other queues ignore it and the caller counts.
   */
  readonly tenantJobs?: TenantJobCap
}

/** {@link SubmitOrGetOptions.tenantJobs}: the tenant's cap on jobs queued or running. */
export interface TenantJobCap {
  /** Most jobs the tenant may have queued or running (`quotas.maxConcurrentJobs`). */
  readonly cap: number
  /** How long the job holds its slot at most when its end is never seen (ms; its timeout and a margin). */
  readonly holdMs: number
}

/** What {@link JobQueue.submitOrGet} did. */
export type SubmitOrGetOutcome<TJob extends QueueJob = ExecJob, TValue = ExecResult> =
  | { readonly kind: 'added' }
  /** The id existed: the job as stored (undefined when its payload is not one of its kind). */
  | { readonly kind: 'exists'; readonly info: JobInfo<TJob, TValue> | undefined }
  /** New, and the tenant already has `count` ≥ its cap ({@link SubmitOrGetOptions.tenantJobs}) jobs queued or running: not added. */
  | { readonly kind: 'over-cap'; readonly count: number }

/**
 * A queue of jobs of one {@link JobKind} (by default exec jobs, {@link ExecJob}). Jobs are keyed by
 * `job.jobId`: submitting an id that exists (waiting, running, or finished within the retention window)
 * does not add a second job.
 */
export interface JobQueue<TJob extends QueueJob = ExecJob, TValue = ExecResult> {
  readonly driver: QueueDriver
  /**
   * Whether {@link submitOrGet} enforces `tenantJobs` across every process of the fleet (the `redis`
   * driver, in its add script). Otherwise the caller counts the tenant's jobs per process.
   */
  readonly countsTenantJobs?: boolean
  /** Adds the job unless one with its id exists (a resubmission is a no-op that resolves the same way). */
  submit(job: TJob): Promise<{ readonly jobId: string }>
  /**
   * {@link submit} that answers an existing job of that id instead (the idempotency answer), with
   * `opts.alongside` written either way. The `redis` driver does it in its add script; the others
   * look the job up ({@link inspect}) and submit it when the id is free. Rejects with
   * `QUEUE_UNAVAILABLE`, saying the job was not accepted, while Redis is away.
   */
  submitOrGet(job: TJob, opts?: SubmitOrGetOptions): Promise<SubmitOrGetOutcome<TJob, TValue>>
  /** Resolves with the job's result once it has one (immediately when it already finished). */
  wait(jobId: string, opts: WaitOptions): Promise<JobResult<TValue>>
  /** The job's result if it finished within the retention window. */
  getResult(jobId: string): Promise<JobResult<TValue> | undefined>
  /** The job, its state and (when finished) its result; undefined when unknown or past retention. */
  inspect(jobId: string): Promise<JobInfo<TJob, TValue> | undefined>
  /**
   * Up to `limit` of the tenant's jobs within the retention window (optionally of one session), newest
   * first. Only that tenant's jobs are ever listed.
   */
  list(tenant: string, opts: { sessionId?: string; limit: number }): Promise<JobInfo<TJob, TValue>[]>
  /** Jobs waiting (including delayed/prioritized) and running, across the queue. */
  counts(): Promise<{ readonly waiting: number; readonly active: number }>
  /**
   * Delivers the job's live output from now on, each chunk numbered (`offset`, see output-log.ts).
   * Resolves once the subscription is active.
   */
  subscribeOutput(jobId: string, listener: (chunk: LoggedChunk) => void): Promise<Unsubscribe>
  /**
   * The job's retained live output, oldest first: its last 1 MiB, while it runs and for a minute
   * after it finished (a reader resuming or reattaching replays it before the live chunks).
   */
  readOutput(jobId: string): Promise<LoggedChunk[]>
  /**
   * Cancels the job wherever it is: a waiting job ends `cancelled` when a worker reaches it (or at once,
   * in-process); a running one has its signal aborted on the worker holding it (the command is killed).
   */
  cancel(jobId: string, reason?: string): Promise<void>
  /** Starts processing jobs in this process. */
  consume(processor: JobProcessor<TJob, TValue>, opts?: ConsumeOptions<TJob, TValue>): Promise<Consumer>
  /** Closes consumers (hands their jobs back), then connections. Pending waits reject. */
  close(): Promise<void>
}
