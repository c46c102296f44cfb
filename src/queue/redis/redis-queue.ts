import { AppError } from '../../errors.js'
import {
  connectRedis,
  createRedisClient,
  keyspace,
  QUEUE_NAMES,
  queueUnavailable,
  quitRedis,
} from '../../redis/index.js'
import { OUTPUT_LOG_CAP_BYTES, parseLoggedMessage } from '../output-log.js'
import { JobWatches } from '../redis-common/job-watches.js'
import { FenceKeys, RedisFenceStore } from '../redis-common/redis-fence.js'
import { STALL_DETECTION } from '../redis-common/stall-detection.js'
import { Subscriber } from '../redis-common/subscriber.js'
import { TenantJobIndex } from '../redis-common/tenant-index.js'
import { ExecJobSchema } from '../schemas.js'
import type { ExecJobResult } from '../schemas.js'
import { trackedConsumer } from '../tracked-consumer.js'
import type { Consumer, JobInfo, JobQueue } from '../types.js'
import { RedisJobStore } from './job-store.js'
import { RedisQueueKeys } from './keys.js'
import { startRedisConsumer } from './redis-consumer.js'
import type { RedisConsumerTuning } from './redis-consumer.js'

/** Options of {@link createRedisJobQueue}. */
export interface RedisQueueOptions extends RedisConsumerTuning {
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

/**
 * The fleet queue on Redis with a job lifecycle of its own (driver `redis`): a submit is one script
 * (idempotent id, tenant index, job hash, waiting list), a take is a blocking pop with the take
 * script pipelined behind it (lease, attempt), a finish is one script (result record, its publish to
 * the waiters, lease end). Running jobs hold a lease their worker extends; a sweep every consumer
 * runs puts back the jobs of workers that died, and their fence decides. Same contract and outage
 * behaviour as the BullMQ driver: producers fail fast while Redis is down (QUEUE_UNAVAILABLE), a
 * `wait` on an accepted job rides the outage out until its timeout; results, live output and cancel
 * requests travel over Redis pub/sub (see docs/redis-path.md).
 */
export async function createRedisJobQueue(options: RedisQueueOptions = {}): Promise<JobQueue> {
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
  const store = new RedisJobStore(command, new RedisQueueKeys(space.jobs(queueName)), fences.keys, index, {
    retentionMs,
    leaseMs: options.lockDurationMs ?? STALL_DETECTION.lockDurationMs,
  })

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
      // A result published while the subscription was away is lost: pending waits check their job.
      sub.onResubscribed(() => watches.recheckAll())
      return sub
    })().catch((err: unknown) => {
      subscriber = undefined
      throw err
    }))

  const finishedResult = async (jobId: string): Promise<ExecJobResult | undefined> => {
    const stored = await store.read(jobId)
    if (!stored) {
      throw new AppError(
        'NOT_FOUND',
        `No job ${jobId} in the queue: never submitted, past retention, or lost by Redis (writes not yet ` +
          'on disk when it crashed); if it was accepted, its command may have run.',
      )
    }
    return stored.result
  }
  const watches = new JobWatches({
    getSubscriber,
    jobChannel: (jobId) => fences.keys.jobChannel(jobId),
    finishedResult,
  })
  // Pending waits check their job again whenever the connection comes back.
  command.on('ready', () => watches.recheckAll())

  const inspectJob = async (jobId: string): Promise<JobInfo | undefined> => {
    const stored = await store.read(jobId)
    if (!stored) return undefined
    let raw: unknown
    try {
      raw = JSON.parse(stored.data)
    } catch {
      return undefined
    }
    // A payload from a foreign producer is nobody's job: it is not described.
    const parsed = ExecJobSchema.safeParse(raw)
    if (!parsed.success) return undefined
    return {
      job: parsed.data,
      state: stored.state,
      ...(stored.result ? { result: stored.result } : {}),
    }
  }

  const consumers = new Set<Consumer>()
  let closed = false

  return {
    driver: 'redis',

    async submit(input) {
      const job = ExecJobSchema.parse(input)
      // The job's watch opens before the job exists, for the wait that usually follows at once: a job
      // first added now cannot have finished before its listener was in place, so that wait needs no
      // read of the job (see bullmq-queue.ts, which does the same). Only while Redis is connected.
      const connected = command.status === 'ready' && liveSubscriber?.connection.status === 'ready'
      const watch = connected ? await watches.open(job.jobId, { deferCheck: true }) : undefined
      let fresh = false
      let accepted = false
      try {
        fresh = await store.add(job)
        accepted = true
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
      return { jobId: job.jobId }
    },

    wait: (jobId, opts) => watches.wait(jobId, opts),

    getResult: (jobId) =>
      finishedResult(jobId).catch((err: unknown) => {
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
        return await store.counts()
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
      const consumer = await startRedisConsumer(
        {
          redisUrl,
          queueName,
          connectTimeoutMs,
          store,
          fences,
          fenceClient: command,
          subscriber: await getSubscriber(),
          tuning: options,
        },
        processor,
        opts,
      )
      return trackedConsumer(consumers, consumer)
    },

    async close() {
      if (closed) return
      closed = true
      await Promise.all([...consumers].map((c) => c.close({ deadlineMs: 0 })))
      watches.rejectAll(new AppError('QUEUE_UNAVAILABLE', 'The job queue closed before the job finished.'))
      const sub = await subscriber?.catch(() => undefined)
      if (sub) await quitRedis(sub.connection)
      await quitRedis(command)
    },
  }
}

function messageOf(err: unknown): string {
  return err instanceof Error ? err.message : String(err)
}
