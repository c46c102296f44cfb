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
import { ExecJobSchema } from '../schemas.js'
import type { ExecJob, ExecJobResult } from '../schemas.js'
import { trackedConsumer } from '../tracked-consumer.js'
import type {
  ConsumeOptions,
  Consumer,
  JobInfo,
  JobProcessor,
  JobQueue,
  QueueDriver,
  SetIfAbsent,
  SubmitOrGetOutcome,
} from '../types.js'
import { JobWatches } from './job-watches.js'
import { FenceKeys, RedisFenceStore } from './redis-fence.js'
import { Subscriber } from './subscriber.js'
import { TenantJobIndex } from './tenant-index.js'

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
}

/** Resolves the defaults, checks the queue name and connects (fails fast while Redis is down). */
export async function openRedisQueueBase(options: RedisQueueBaseOptions): Promise<RedisQueueBase> {
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
  return { redisUrl, queueName, prefix, space, retentionMs, connectTimeoutMs, command, fences, index }
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
  add(job: ExecJob): Promise<boolean>
  /**
   * Adds the job unless its id exists, with `alongside`, in one step; resolves the existing job's raw
   * record when there is one. Optional: the queue then offers no {@link JobQueue.submitOrGet}.
   */
  addOrGet?(
    job: ExecJob,
    alongside: SetIfAbsent | undefined,
  ): Promise<{ added: true } | { added: false; raw: { data: unknown; info: Omit<JobInfo, 'job'> } }>
  /** The job's result, undefined while it runs or waits; NOT_FOUND ({@link unknownJob}) when unknown. */
  finishedResult(jobId: string): Promise<ExecJobResult | undefined>
  /** The job's raw record: its payload (unparsed) and state; undefined when unknown. */
  inspect(jobId: string): Promise<{ data: unknown; info: Omit<JobInfo, 'job'> } | undefined>
  counts(): Promise<{ readonly waiting: number; readonly active: number }>
  /** Starts a consumer of this queue on the shared connection, fences and subscriber. */
  consume(
    processor: JobProcessor,
    opts: ConsumeOptions | undefined,
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
export function redisJobQueue(base: RedisQueueBase, backend: JobBackend): JobQueue {
  const { redisUrl, queueName, connectTimeoutMs, command, fences, index } = base
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
    finishedResult: (jobId) => backend.finishedResult(jobId),
  })
  // Pending waits check their job again whenever the connection comes back (after a Redis outage the
  // pub/sub 'done' message may have been lost, and a wait may have started without listeners).
  command.on('ready', () => watches.recheckAll())

  const inspectJob = async (jobId: string): Promise<JobInfo | undefined> => {
    const raw = await backend.inspect(jobId)
    if (!raw) return undefined
    // A payload from a foreign producer is nobody's job: it is not described (and ends `failed` on a worker).
    const parsed = ExecJobSchema.safeParse(raw.data)
    return parsed.success ? { job: parsed.data, ...raw.info } : undefined
  }

  const consumers = new Set<Consumer>()
  let closed = false

  /** Adds a job with `add` (which resolves whether it is new) under its watch; see `submit`. */
  const enqueue = async <T>(job: ExecJob, add: () => Promise<T>, isNew: (r: T) => boolean): Promise<T> => {
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

  return {
    driver: backend.driver,

    async submit(input) {
      const job = ExecJobSchema.parse(input)
      await enqueue(
        job,
        () => backend.add(job),
        (fresh) => fresh,
      )
      return { jobId: job.jobId }
    },

    ...(addOrGet
      ? {
          async submitOrGet(
            input: ExecJob,
            opts: { alongside?: SetIfAbsent } = {},
          ): Promise<SubmitOrGetOutcome> {
            const job = ExecJobSchema.parse(input)
            const r = await enqueue(
              job,
              () => addOrGet(job, opts.alongside),
              (o) => o.added,
            )
            if (r.added) return { kind: 'added' }
            // A payload from a foreign producer is nobody's job (as in inspect).
            const parsed = ExecJobSchema.safeParse(r.raw.data)
            return { kind: 'exists', info: parsed.success ? { job: parsed.data, ...r.raw.info } : undefined }
          },
        }
      : {}),

    wait: (jobId, opts) => watches.wait(jobId, opts),

    getResult: (jobId) =>
      backend.finishedResult(jobId).catch((err: unknown) => {
        if (err instanceof AppError && err.code === 'NOT_FOUND') return undefined
        throw queueUnavailable(err, `Reading the result of job ${jobId}`)
      }),

    inspect: (jobId) =>
      inspectJob(jobId).catch((err: unknown) => {
        throw queueUnavailable(err, `Looking up job ${jobId}`)
      }),

    async list(tenant, opts) {
      try {
        const ids = await index.recent(tenant, opts)
        const infos = await Promise.all(ids.map((id) => inspectJob(id)))
        return infos.filter((i): i is JobInfo => i !== undefined && i.job.tenant === tenant)
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
