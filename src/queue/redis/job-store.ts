import type { Redis } from 'ioredis'
import { OUTPUT_LOG_LINGER_MS } from '../output-log.js'
import { JobResultSchema } from '../schemas.js'
import type { QueueJob, JobResult } from '../schemas.js'
import type { FenceKeys } from '../redis-common/redis-fence.js'
import { TenantJobIndex } from '../redis-common/tenant-index.js'
import type { RedisQueueKeys } from './keys.js'
import { defineQueueScripts } from './scripts.js'
import type { QueueScripts } from './scripts.js'

/** A job as the take script hands it to a consumer. */
export interface TakenJob {
  readonly jobId: string
  /** The job's payload as submitted (JSON; the consumer validates it). */
  readonly data: string
  /** 1 on first delivery, counting up on every take. */
  readonly attempt: number
  /** How often its lease lapsed and the sweep put it back. */
  readonly stalls: number
}

/** A job's stored state, as read for views and waits. */
export interface StoredJob {
  readonly data: string
  readonly state: 'waiting' | 'active' | 'finished'
  /** The fence's result record, when the job has one. */
  readonly result?: JobResult
}

/** Options of {@link RedisJobStore}. */
export interface RedisJobStoreOptions {
  /** How long finished jobs (and index entries) are kept (ms). */
  readonly retentionMs: number
  /** A running job's lease (ms): the sweep puts back a job whose worker did not extend it in time. */
  readonly leaseMs: number
}

/**
 * The jobs of one queue under the `redis` driver: their hashes, the waiting list, leases and live
 * consumers, each change one script (see scripts.ts).
 */
export class RedisJobStore {
  private readonly cmd: QueueScripts

  constructor(
    private readonly client: Redis,
    readonly keys: RedisQueueKeys,
    private readonly fenceKeys: FenceKeys,
    private readonly index: TenantJobIndex,
    private readonly opts: RedisJobStoreOptions,
  ) {
    this.cmd = defineQueueScripts(client)
  }

  /** Adds the job (and indexes it for its tenant) unless its id exists; resolves `true` when added. */
  async add(job: QueueJob): Promise<boolean> {
    const indexKeys = this.index.keys(job.tenant, job.sessionId)
    const trimBefore = TenantJobIndex.trims(job.jobId) ? String(Date.now() - this.opts.retentionMs) : ''
    const added = await this.cmd.sbxRqAdd(
      2 + indexKeys.length,
      this.keys.job(job.jobId),
      this.keys.wait,
      ...indexKeys,
      job.jobId,
      JSON.stringify(job),
      job.submittedAt,
      this.opts.retentionMs,
      trimBefore,
    )
    return added === 1
  }

  /**
   * The job's payload, state and result record; `undefined` when unknown or past retention (one
   * command: the lookup of a new job's id before its submit costs no more).
   */
  async read(jobId: string): Promise<StoredJob | undefined> {
    const [data, state] = await this.client.hmget(this.keys.job(jobId), 'data', 'state')
    if (!data) return undefined
    const done = await this.client.get(this.fenceKeys.job(jobId)[0])
    const result = done ? JobResultSchema.parse(JSON.parse(done)) : undefined
    return {
      data,
      state: result || state === 'finished' ? 'finished' : state === 'active' ? 'active' : 'waiting',
      ...(result ? { result } : {}),
    }
  }

  /** Jobs waiting and running (leased). */
  async counts(): Promise<{ waiting: number; active: number }> {
    const replies = await this.client.pipeline().llen(this.keys.wait).zcard(this.keys.leases).exec()
    const failed = replies?.find(([err]) => err)
    if (failed?.[0]) throw failed[0]
    return { waiting: Number(replies?.[0]?.[1] ?? 0), active: Number(replies?.[1]?.[1] ?? 0) }
  }

  /**
   * Stores the attempt's result through the fence (first writer wins; published to the waiters) and
   * ends the job: one script. Resolves with the stored result (another attempt's, when it came first).
   */
  async finish(jobId: string, result: JobResult): Promise<JobResult> {
    const [done] = this.fenceKeys.job(jobId)
    const existing = (await this.cmd.sbxRqFinish(
      done,
      ...this.fenceKeys.log(jobId),
      this.keys.job(jobId),
      this.keys.leases,
      JSON.stringify(result),
      this.opts.retentionMs,
      this.fenceKeys.jobChannel(jobId),
      OUTPUT_LOG_LINGER_MS,
      jobId,
    )) as string | null
    return existing === null ? result : JobResultSchema.parse(JSON.parse(existing))
  }

  /** Puts a running attempt's job back at the head of the waiting list; `false` when it no longer held it. */
  async handBack(jobId: string, attempt: number): Promise<boolean> {
    const r = await this.cmd.sbxRqHandBack(
      this.keys.job(jobId),
      this.keys.leases,
      this.keys.wait,
      jobId,
      attempt,
    )
    return r === 1
  }

  /** Extends the worker's heartbeat and its jobs' leases. */
  async refresh(workerId: string, jobIds: Iterable<string>): Promise<void> {
    await this.cmd.sbxRqRefresh(this.keys.leases, this.keys.workers, workerId, this.opts.leaseMs, ...jobIds)
  }

  /** Puts back lapsed leases and dead consumers' popped jobs; resolves with how many. */
  async sweep(limit = 100): Promise<number> {
    const n = await this.cmd.sbxRqSweep(
      this.keys.leases,
      this.keys.wait,
      this.keys.workers,
      this.keys.jobPrefix,
      this.keys.pendingPrefix,
      limit,
    )
    return Number(n)
  }

  /** A closing consumer's popped-but-untaken jobs go back to the waiting list; it leaves the live set. */
  async releaseWorker(workerId: string): Promise<void> {
    await this.cmd.sbxRqReleaseWorker(
      this.keys.pending(workerId),
      this.keys.wait,
      this.keys.workers,
      workerId,
    )
  }
}

/**
 * The blocking side of a consumer: on its own connection, a blocking pop (the waiting list's oldest
 * job to the consumer's pending list) with the take script right behind it in one pipeline, so that
 * taking a job is one round trip: Redis runs the script as soon as the pop returns.
 */
export class JobTaker {
  private readonly cmd: QueueScripts

  constructor(
    private readonly client: Redis,
    private readonly keys: RedisQueueKeys,
    private readonly workerId: string,
    private readonly leaseMs: number,
  ) {
    this.cmd = defineQueueScripts(client)
  }

  /**
   * Waits up to `blockSeconds` for a job and takes it. Resolves `undefined` when none came (or the
   * one that came was gone or finished by then).
   */
  async take(blockSeconds: number): Promise<TakenJob | undefined> {
    const pending = this.keys.pending(this.workerId)
    const pipeline = this.client.pipeline().blmove(this.keys.wait, pending, 'RIGHT', 'LEFT', blockSeconds)
    // Queued on the pipeline (its reply comes with exec()'s), not a promise of its own to await.
    void (pipeline as unknown as QueueScripts).sbxRqTake(
      pending,
      this.keys.leases,
      this.keys.jobPrefix,
      this.workerId,
      this.leaseMs,
    )
    const replies = await pipeline.exec()
    const failed = replies?.find(([err]) => err)
    if (failed?.[0]) throw failed[0]
    return parseTaken(replies?.[1]?.[1])
  }

  /** Takes what is left in the pending list (a pop whose take did not run), without blocking. */
  async takePending(): Promise<TakenJob | undefined> {
    const r = await this.cmd.sbxRqTake(
      this.keys.pending(this.workerId),
      this.keys.leases,
      this.keys.jobPrefix,
      this.workerId,
      this.leaseMs,
    )
    return parseTaken(r)
  }
}

function parseTaken(reply: unknown): TakenJob | undefined {
  if (!Array.isArray(reply) || reply.length < 4) return undefined
  const [jobId, data, attempt, stalls] = reply as [string, string, number | string, string]
  return { jobId, data, attempt: Number(attempt), stalls: Number(stalls) }
}
