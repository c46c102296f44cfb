import type { Redis } from 'ioredis'
import { AppError } from '../../errors.js'
import {
  connectRedis,
  createRedisClient,
  keyspace,
  type Keyspace,
  QUEUE_NAMES,
  queueUnavailable,
  quitRedis,
} from '../../redis/index.js'
import { OUTPUT_LOG_CAP_BYTES, parseLoggedMessage } from '../output-log.js'
import type { JobResult, QueueJob } from '../schemas.js'
import { EXEC_JOBS, type AnyJobKind, anyKind } from '../job-kind.js'
import type { AnyJobProcessor } from '../run-job.js'
import { trackedConsumer } from '../tracked-consumer.js'
import type {
  ConsumeOptions,
  Consumer,
  JobInfo,
  JobKind,
  JobQueue,
  QueueDriver,
  SetIfAbsent,
  SubmitOrGetOptions,
  SubmitOrGetOutcome,
} from '../types.js'
import { lookUpThenSubmit, writeAlongside } from '../submit-or-get.js'
import { JobWatches } from './job-watches.js'
import { FenceKeys, RedisFenceStore } from './redis-fence.js'
import { Subscriber } from './subscriber.js'
import { TenantJobIndex, type TenantSlots } from './tenant-index.js'

/** Options both Redis drivers take (`bullmq`, `redis`). */
export interface RedisQueueBaseOptions {
  /** Redis to use; callers pass REDIS_URL (this module reads no env). @default 'redis://127.0.0.1:6379' */
  redisUrl?: string
  /** Queue name (no ':'). @default 'sbx-exec' */
  queueName?: string
  /** Key prefix; tests use a unique one each. @default 'sbx' */
  prefix?: string
  /** How long finished jobs, their results and fence records are kept (ms). @default 3600000 */
  retentionMs?: number
  /** Live output retained per job for resuming readers (bytes). @default 1048576 */
  outputLogCapBytes?: number
  /** Live output kept per stream for interrupted reports (bytes). @default 65536 */
  tailCapBytes?: number
  /** Give up connecting to Redis after this long (ms). @default 5000 */
  connectTimeoutMs?: number
}

/** Options of a Redis driver's queue of another job kind than exec jobs (`queueName` is then its own). */
export interface RedisKindOptions<TJob extends QueueJob, TValue> {
  /** What the queue carries. @default EXEC_JOBS */
  kind: JobKind<TJob, TValue>
}

/** What both Redis drivers share: settings, the command connection, fences, the tenant index. */
export interface RedisQueueBase {
  readonly redisUrl: string
  readonly queueName: string
  readonly prefix: string
  readonly space: Keyspace
  readonly retentionMs: number
  readonly connectTimeoutMs: number
  readonly command: Redis
  readonly fences: RedisFenceStore
  readonly index: TenantJobIndex
  /** What the queue carries (its payloads are parsed by it). */
  readonly kind: AnyJobKind
}

/** Resolves the defaults, checks the queue name and connects (fails fast while Redis is down). */
export async function openRedisQueueBase(
  options: RedisQueueBaseOptions & { kind?: JobKind<QueueJob, unknown> },
): Promise<RedisQueueBase> {
  const kind = options.kind ?? anyKind(EXEC_JOBS)
  const redisUrl = options.redisUrl ?? 'redis://127.0.0.1:6379'
  const queueName = options.queueName ?? QUEUE_NAMES.exec
  const prefix = options.prefix ?? 'sbx'
  const space = keyspace(prefix)
  const retentionMs = options.retentionMs ?? 3_600_000
  const connectTimeoutMs = options.connectTimeoutMs ?? 5_000
  if (queueName.includes(':'))
    throw new AppError('CONFIG_INVALID', `Queue name '${queueName}' must not contain ':'.`)
  const command = createRedisClient(redisUrl, 'command', `sbx-queue:${queueName}`)
  await connectRedis(command, redisUrl, connectTimeoutMs)
  const fences = new RedisFenceStore(command, new FenceKeys(space.fences(queueName)), {
    retentionMs,
    tailCapBytes: options.tailCapBytes ?? 65_536,
    logCapBytes: options.outputLogCapBytes ?? OUTPUT_LOG_CAP_BYTES,
  })
  const index = new TenantJobIndex(command, space.jobIndex(queueName), retentionMs)
  return { redisUrl, queueName, prefix, space, retentionMs, connectTimeoutMs, command, fences, index, kind }
}

/** The message of a job nobody knows (the NOT_FOUND a driver's `finishedResult` throws). */
export function unknownJob(jobId: string): AppError {
  return new AppError(
    'NOT_FOUND',
    `No job ${jobId} in the queue: never submitted, past retention, or lost by Redis (writes not yet ` +
      'on disk when it crashed); if it was accepted, its command may have run.',
  )
}

/** What differs between the Redis drivers: where jobs live and how they are taken. */
export interface JobBackend {
  readonly driver: QueueDriver
  /**
   * Adds the job (and its tenant index entry) unless its id exists; resolves `true` when it is new in
   * the tenant's index (no submit of this id came before). Rejects when Redis did not take it.
   */
  add(job: QueueJob): Promise<boolean>
  /**
   * Adds the job unless its id exists, with `alongside`, in one step; resolves the existing job's raw
   * record when there is one. Optional: without it, {@link JobQueue.submitOrGet} looks the job up and
   * adds it when the id is free, with `alongside` written on the command connection beside the lookup.
   */
  addOrGet?(
    job: QueueJob,
    alongside: SetIfAbsent | undefined,
    slots?: TenantSlots,
  ): Promise<
    | { added: true }
    | { added: false; raw: { data: unknown; info: Omit<JobInfo<QueueJob, unknown>, 'job'> } }
    | { added: false; overCap: number }
  >
  /**
   * The job's result (its `completed` value not yet checked by the kind), undefined while it runs or
   * waits; NOT_FOUND ({@link unknownJob}) when unknown.
   */
  finishedResult(jobId: string): Promise<JobResult | undefined>
  /** The job's raw record: its payload (unparsed) and state; undefined when unknown. */
  inspect(
    jobId: string,
  ): Promise<{ data: unknown; info: Omit<JobInfo<QueueJob, unknown>, 'job'> } | undefined>
  counts(): Promise<{ readonly waiting: number; readonly active: number }>
  /** Starts a consumer of this queue on the shared connection, fences and subscriber. */
  consume(
    processor: AnyJobProcessor,
    opts: ConsumeOptions<QueueJob, unknown> | undefined,
    subscriber: Subscriber,
  ): Promise<Consumer>
  /** Closes what the backend opened itself (after the consumers, before the command connection). */
  close(): Promise<void>
}

/**
 * The {@link JobQueue} over one backend, with what both Redis drivers do alike: the result watches
 * (one pattern subscription per process, started lazily; pending waits re-checked whenever a
 * connection comes back), submits that open the job's watch before the add, tenant-scoped listing,
 * live output, cancel, and close. Producers fail fast while Redis is down (QUEUE_UNAVAILABLE).
 */
export function redisJobQueue(base: RedisQueueBase, backend: JobBackend): JobQueue<QueueJob, unknown> {
  const { redisUrl, queueName, connectTimeoutMs, command, fences, index, kind, space } = base
  // Results are checked against the kind's schema where they leave the queue.
  const finishedResult = async (jobId: string): Promise<JobResult | undefined> => {
    const raw = await backend.finishedResult(jobId)
    return raw && kind.result.parse(raw)
  }
  // Started lazily: a producer-only or consumer-only process does not pay for what it does not use.
  let subscriber: Promise<Subscriber> | undefined
  let liveSubscriber: Subscriber | undefined
  // A failed start (Redis away) is not cached: the next caller tries again.
  const getSubscriber = (): Promise<Subscriber> =>
    (subscriber ??= (async () => {
      const client = createRedisClient(redisUrl, 'subscriber', `sbx-sub:${queueName}`)
      await connectRedis(client, redisUrl, connectTimeoutMs)
      const sub = new Subscriber(client, fences.keys.jobChannelPrefix)
      liveSubscriber = sub
      // A result published while the subscription was away is lost: pending waits check their job
      // again once it is back (as they do when the command connection comes back).
      sub.onResubscribed(() => watches.recheckAll())
      return sub
    })().catch((err: unknown) => {
      subscriber = undefined
      throw err
    }))
  const watches = new JobWatches({
    getSubscriber,
    jobChannel: (jobId) => fences.keys.jobChannel(jobId),
    finishedResult,
    resultSchema: kind.result,
  })
  // Pending waits check their job again whenever the connection comes back (after a Redis outage the
  // pub/sub 'done' message may have been lost, and a wait may have started without listeners).
  command.on('ready', () => watches.recheckAll())

  /** The job of a raw record, checked by the kind; undefined for a payload from a foreign producer. */
  const describe = (raw: {
    data: unknown
    info: Omit<JobInfo<QueueJob, unknown>, 'job'>
  }): JobInfo<QueueJob, unknown> | undefined => {
    // A payload from a foreign producer is nobody's job: it is not described (and ends `failed` on a worker).
    const parsed = kind.payload.safeParse(raw.data)
    if (!parsed.success) return undefined
    const { result, ...info } = raw.info
    return { job: parsed.data, ...info, ...(result ? { result: kind.result.parse(result) } : {}) }
  }
  const inspectJob = async (jobId: string): Promise<JobInfo<QueueJob, unknown> | undefined> => {
    const raw = await backend.inspect(jobId)
    return raw ? describe(raw) : undefined
  }

  const consumers = new Set<Consumer>()
  let closed = false

  /** Adds a job with `add` (which resolves whether it is new) under its watch; see `submit`. */
  const enqueue = async <T>(job: QueueJob, add: () => Promise<T>, isNew: (r: T) => boolean): Promise<T> => {
    // The job's watch opens before the job exists, for the wait that usually follows at once (the
    // caller's, the tenant's job slot): a job first added now cannot have finished before its
    // listener was in place, so that wait needs no read of the job. This reference is handed over
    // on the next turn of the event loop; a wait that comes later opens a watch that checks. Only
    // while Redis is connected: a submit never waits for a subscription (it fails fast instead).
    const connected = command.status === 'ready' && liveSubscriber?.connection.status === 'ready'
    const watch = connected ? await watches.open(job.jobId, { deferCheck: true }) : undefined
    let fresh = false
    let accepted = false
    try {
      const r = await add()
      fresh = isNew(r)
      accepted = true
      return r
    } catch (err) {
      throw new AppError(
        'QUEUE_UNAVAILABLE',
        `Could not enqueue job ${job.jobId}: Redis is unreachable (${messageOf(err)}); ` +
          'the job was not accepted: submit it again once Redis is back (with the same Idempotency-Key, ' +
          'a repeat never runs it twice).',
        { retryable: true, cause: err },
      )
    } finally {
      if (watch) {
        if (accepted && (!fresh || !watch.listening)) watch.check()
        setImmediate(() => watch.release())
      }
    }
  }
  const addOrGet = backend.addOrGet?.bind(backend)

  const submit = async (input: QueueJob): Promise<{ readonly jobId: string }> => {
    const job = kind.payload.parse(input)
    await enqueue(
      job,
      () => backend.add(job),
      (fresh) => fresh,
    )
    return { jobId: job.jobId }
  }
  const inspect = (jobId: string): Promise<JobInfo<QueueJob, unknown> | undefined> =>
    inspectJob(jobId).catch((err: unknown) => {
      throw queueUnavailable(err, `Looking up job ${jobId}`)
    })

  return {
    driver: backend.driver,
    // The add script counts the tenant's jobs for every process (see TenantSlots).
    countsTenantJobs: backend.addOrGet !== undefined,
    submit,

    async submitOrGet(
      input: QueueJob,
      opts: SubmitOrGetOptions = {},
    ): Promise<SubmitOrGetOutcome<QueueJob, unknown>> {
      const job = kind.payload.parse(input)
      const { alongside, tenantJobs } = opts
      if (!addOrGet) return lookUpThenSubmit({ inspect, submit }, job, writeAlongside(alongside, command))
      const slots = tenantJobs && { key: `${space.tenantJobs}${job.tenant}`, ...tenantJobs }
      // The add script answers the lookup, and writes the record when it lives on this Redis.
      const folded = alongside?.setIfAbsent
      const [, r] = await Promise.all([
        folded ? undefined : writeAlongside(alongside),
        enqueue(
          job,
          () => addOrGet(job, folded, slots),
          (o) => o.added,
        ),
      ])
      if (r.added) return { kind: 'added' }
      return 'overCap' in r
        ? { kind: 'over-cap', count: r.overCap }
        : { kind: 'exists', info: describe(r.raw) }
    },

    wait: (jobId, opts) => watches.wait(jobId, opts),

    getResult: (jobId) =>
      finishedResult(jobId).catch((err: unknown) => {
        if (err instanceof AppError && err.code === 'NOT_FOUND') return undefined
        throw queueUnavailable(err, `Reading the result of job ${jobId}`)
      }),

    inspect,

    async list(tenant, opts) {
      try {
        const ids = await index.recent(tenant, opts)
        const infos = await Promise.all(ids.map((id) => inspectJob(id)))
        return infos.filter(
          (i): i is JobInfo<QueueJob, unknown> => i !== undefined && i.job.tenant === tenant,
        )
      } catch (err) {
        throw queueUnavailable(err, `Listing the jobs of tenant ${tenant}`)
      }
    },

    async counts() {
      try {
        return await backend.counts()
      } catch (err) {
        throw queueUnavailable(err, 'Counting jobs')
      }
    },

    async subscribeOutput(jobId, listener) {
      const sub = await getSubscriber()
      return sub.on(fences.keys.jobChannel(jobId), (message) => {
        const chunk = parseLoggedMessage(message)
        if (chunk) listener(chunk)
      })
    },

    async readOutput(jobId) {
      try {
        return await fences.readLog(jobId)
      } catch (err) {
        throw queueUnavailable(err, `Reading the live output of job ${jobId}`)
      }
    },

    async cancel(jobId, reason = 'cancelled by the caller') {
      try {
        await fences.requestCancel(jobId, reason)
      } catch (err) {
        throw queueUnavailable(err, `Cancelling job ${jobId}`)
      }
    },

    async consume(processor, opts) {
      const consumer = await backend.consume(processor, opts, await getSubscriber())
      return trackedConsumer(consumers, consumer)
    },

    async close() {
      if (closed) return
      closed = true
      await Promise.all([...consumers].map((c) => c.close({ deadlineMs: 0 })))
      watches.rejectAll(new AppError('QUEUE_UNAVAILABLE', 'The job queue closed before the job finished.'))
      // Client libraries leave connections they were handed open: quit ours.
      const sub = await subscriber?.catch(() => undefined)
      if (sub) await quitRedis(sub.connection)
      await backend.close()
      await quitRedis(command)
    },
  }
}

function messageOf(err: unknown): string {
  return err instanceof Error ? err.message : String(err)
}
