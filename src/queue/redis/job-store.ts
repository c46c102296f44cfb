import type { Redis } from 'ioredis'
import { OUTPUT_LOG_LINGER_MS } from '../output-log.js'
import { JobResultSchema } from '../schemas.js'
import type { JobResult, OutputChunk, QueueJob } from '../schemas.js'
import type { SetIfAbsent } from '../types.js'
import type { FenceKeys } from '../redis-common/redis-fence.js'
import { TenantJobIndex, type TenantSlots } from '../redis-common/tenant-index.js'
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

/** What an add found: a new job, the one of that id stored before, or the tenant's cap full (`overCap` jobs). */
export type AddOutcome =
  | { readonly added: true }
  | { readonly added: false; readonly stored: StoredJob }
  | { readonly added: false; readonly overCap: number }

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
  /** Live output retained per job for resuming readers (bytes), as the fence store's. */
  readonly logCapBytes: number
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
    return (await this.addOrGet(job)).added
  }

  /**
   * Adds the job (and indexes it for its tenant) unless its id exists, in one script with its lookup
   * and the write that rides along: resolves the existing job when there is one (its idempotency
   * answer needs no read of its own). With `slots`, a new job must fit the tenant's cap on jobs
   * queued or running, across the fleet: past it, nothing is added (`over-cap`).
   */
  async addOrGet(job: QueueJob, alongside?: SetIfAbsent, slots?: TenantSlots): Promise<AddOutcome> {
    const indexKeys = this.index.keys(job.tenant, job.sessionId)
    const trims = TenantJobIndex.trims(job.jobId)
    const refresh = indexKeys.map((k) => (this.index.refreshDue(k, trims) ? '1' : '0')).join('')
    const jobKey = this.keys.job(job.jobId)
    const slotsKey = slots ? slots.key : jobKey
    const slotRefresh = slots && this.index.refreshDue(slots.key, trims) ? '1' : '0'
    const reply = (await this.cmd
      .sbxRqAdd(
        5 + indexKeys.length,
        jobKey,
        this.keys.wait,
        this.fenceKeys.job(job.jobId)[0],
        alongside?.key ?? jobKey,
        slotsKey,
        ...indexKeys,
        job.jobId,
        JSON.stringify(job),
        job.submittedAt,
        this.index.ttlMs,
        trims ? String(Date.now() - this.opts.retentionMs) : '',
        refresh,
        alongside?.field ?? '',
        alongside?.value ?? '',
        slots ? slots.cap : '',
        slots ? Date.now() + slots.holdMs : '',
        slotRefresh,
      )
      .catch((err: unknown) => {
        this.index.refreshFailed(slots ? [...indexKeys, slots.key] : indexKeys)
        throw err
      })) as [number, string?, string?, string?]
    if (reply[0] === 1) return { added: true }
    // The id existed or the cap refused: the script wrote no index entry, so no TTL either.
    this.index.refreshFailed(slots ? [...indexKeys, slots.key] : indexKeys)
    if (reply[0] === 2) return { added: false, overCap: Number(reply[1]) }
    const [, data = '', state = '', done = ''] = reply
    return { added: false, stored: storedJob(data, state, done || null) }
  }

  /**
   * The job's payload, state and result record; `undefined` when unknown or past retention (one
   * command: the lookup of a new job's id before its submit costs no more).
   */
  async read(jobId: string): Promise<StoredJob | undefined> {
    const [data, state] = await this.client.hmget(this.keys.job(jobId), 'data', 'state')
    if (!data) return undefined
    const done = await this.client.get(this.fenceKeys.job(jobId)[0])
    return storedJob(data, state ?? null, done)
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
   * ends the job: one script. `lastChunk`, the attempt's last live chunk not yet sent, is numbered,
   * logged and published with it (before the result, see scripts.ts). Resolves with the stored result (another attempt's, when it came first).
   */
  async finish(jobId: string, result: JobResult, lastChunk?: OutputChunk): Promise<JobResult> {
    const [done] = this.fenceKeys.job(jobId)
    const chunk = lastChunk
      ? [lastChunk.stream === 'stdout' ? 'o' : 'e', lastChunk.data, this.opts.logCapBytes]
      : []
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
      ...chunk,
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

/** What one take brought: whether a job was popped at all, and the jobs taken (leased to the consumer). */
export interface Taken {
  /** Whether the pop found a job (false: the blocking pop timed out, or nothing was pending). */
  readonly popped: boolean
  /** The jobs taken, oldest first; a popped job that was gone or finished is dropped. */
  readonly jobs: TakenJob[]
}

/** Most jobs one take leases beyond the popped one (bounds the script's run). */
export const MAX_TAKE_MORE = 31

/**
 * The blocking side of a consumer: on its own connection, a blocking pop (the waiting list's oldest
 * job to the consumer's pending list) with the take script right behind it in one pipeline, so that
 * taking a job is one round trip: Redis runs the script as soon as the pop returns. The script takes
 * up to `more` further waiting jobs in the same step (a backlog costs one round trip, not one per job).
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
   * Waits up to `blockSeconds` for a job and takes it, with up to `more` further waiting jobs (at
   * most {@link MAX_TAKE_MORE}).
   */
  async take(blockSeconds: number, more = 0): Promise<Taken> {
    const pending = this.keys.pending(this.workerId)
    const pipeline = this.client.pipeline().blmove(this.keys.wait, pending, 'RIGHT', 'LEFT', blockSeconds)
    // Queued on the pipeline (its reply comes with exec()'s), not a promise of its own to await.
    void (pipeline as unknown as QueueScripts).sbxRqTake(...this.takeArgs(more))
    const replies = await pipeline.exec()
    const failed = replies?.find(([err]) => err)
    if (failed?.[0]) throw failed[0]
    return parseTaken(replies?.[1]?.[1])
  }

  /** Takes what is left in the pending list (a pop whose take did not run), without blocking. */
  async takePending(more = 0): Promise<Taken> {
    return parseTaken(await this.cmd.sbxRqTake(...this.takeArgs(more)))
  }

  private takeArgs(more: number): (string | number)[] {
    return [
      this.keys.pending(this.workerId),
      this.keys.leases,
      this.keys.wait,
      this.keys.jobPrefix,
      this.workerId,
      this.leaseMs,
      Math.max(0, Math.min(MAX_TAKE_MORE, Math.floor(more))),
    ]
  }
}

/** A job's stored form from its hash fields and result record. */
function storedJob(data: string, state: string | null, done: string | null): StoredJob {
  const result = done ? JobResultSchema.parse(JSON.parse(done)) : undefined
  return {
    data,
    state: result || state === 'finished' ? 'finished' : state === 'active' ? 'active' : 'waiting',
    ...(result ? { result } : {}),
  }
}

function parseTaken(reply: unknown): Taken {
  if (!Array.isArray(reply)) return { popped: false, jobs: [] }
  const jobs: TakenJob[] = []
  for (let k = 0; k + 3 < reply.length; k += 4) {
    const [jobId, data, attempt, stalls] = reply.slice(k, k + 4) as [string, string, number | string, string]
    jobs.push({ jobId, data, attempt: Number(attempt), stalls: Number(stalls) })
  }
  return { popped: true, jobs }
}
