import { Queue } from 'bullmq'
import { AppError } from '../../errors.js'
import { OUTPUT_LOG_CAP_BYTES, parseLoggedMessage } from '../output-log.js'
import { ExecJobResultSchema, ExecJobSchema } from '../schemas.js'
import type { ExecJobResult } from '../schemas.js'
import type { Consumer, JobInfo, JobQueue } from '../types.js'
import { queueGaveUp, startBullmqConsumer } from './bullmq-consumer.js'
import type { BullmqConsumerTuning } from './bullmq-consumer.js'
import {
  connectRedis,
  createRedisClient,
  keyspace,
  QUEUE_NAMES,
  queueUnavailable,
  quitRedis,
} from '../../redis/index.js'
import { JobWatches } from '../redis-common/job-watches.js'
import { FenceKeys, RedisFenceStore } from '../redis-common/redis-fence.js'
import { Subscriber } from '../redis-common/subscriber.js'
import { TenantJobIndex } from '../redis-common/tenant-index.js'
import { trackedConsumer } from '../tracked-consumer.js'

/** Options of {@link createBullmqJobQueue}. */
export interface BullmqQueueOptions extends BullmqConsumerTuning {
  /** Redis to use; callers pass REDIS_URL (this module reads no env). @default 'redis://127.0.0.1:6379' */
  redisUrl?: string
  /** BullMQ queue name (no ':'). @default 'sbx-exec' */
  queueName?: string
  /** BullMQ key prefix; tests use a unique one each. @default 'sbx' */
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
 * The fleet queue: BullMQ on Redis. Producers fail fast while Redis is down (QUEUE_UNAVAILABLE: submit,
 * inspect, cancel, subscriptions), while `wait` on an accepted job rides out an outage until its
 * timeout (the job is checked again when the connection comes back); results arrive on the job's
 * channel (one pattern subscription per process) and are checked in the fence's result record; live output and cancel requests travel over Redis pub/sub;
 * fence records make redeliveries safe (see ../fence.ts).
 */
export async function createBullmqJobQueue(options: BullmqQueueOptions = {}): Promise<JobQueue> {
  const redisUrl = options.redisUrl ?? 'redis://127.0.0.1:6379'
  const queueName = options.queueName ?? QUEUE_NAMES.exec
  const prefix = options.prefix ?? 'sbx'
  const keys = keyspace(prefix)
  const retentionMs = options.retentionMs ?? 3_600_000
  const connectTimeoutMs = options.connectTimeoutMs ?? 5_000
  if (queueName.includes(':'))
    throw new AppError('CONFIG_INVALID', `Queue name '${queueName}' must not contain ':'.`)

  const command = createRedisClient(redisUrl, 'command', `sbx-queue:${queueName}`)
  await connectRedis(command, redisUrl, connectTimeoutMs)
  const fences = new RedisFenceStore(command, new FenceKeys(keys.fences(queueName)), {
    retentionMs,
    tailCapBytes: options.tailCapBytes ?? 65_536,
    logCapBytes: options.outputLogCapBytes ?? OUTPUT_LOG_CAP_BYTES,
  })
  const index = new TenantJobIndex(command, keys.jobIndex(queueName), retentionMs)
  const retention = { age: Math.ceil(retentionMs / 1000) }
  const queue = new Queue(queueName, {
    connection: command,
    prefix,
    defaultJobOptions: { removeOnComplete: retention, removeOnFail: retention, attempts: 1 },
    streams: { events: { maxLen: 2_000 } },
  })
  queue.on('error', () => undefined)

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
  const finishedResult = async (jobId: string): Promise<ExecJobResult | undefined> => {
    const stored = await fences.result(jobId)
    if (stored) return stored
    const job = await queue.getJob(jobId)
    if (!job) {
      throw new AppError(
        'NOT_FOUND',
        `No job ${jobId} in the queue: never submitted, past retention, or lost by Redis (writes not yet ` +
          'on disk when it crashed); if it was accepted, its command may have run.',
      )
    }
    if (!job.finishedOn) return undefined
    if (job.failedReason) return queueGaveUp(job.failedReason)
    return ExecJobResultSchema.parse(job.returnvalue)
  }

  const watches = new JobWatches({
    getSubscriber,
    jobChannel: (jobId) => fences.keys.jobChannel(jobId),
    finishedResult,
  })
  // Pending waits check their job again whenever the connection comes back (after a Redis outage the
  // pub/sub 'done' message may have been lost, and a wait may have started without listeners).
  command.on('ready', () => watches.recheckAll())

  const inspectJob = async (jobId: string): Promise<JobInfo | undefined> => {
    const job = await queue.getJob(jobId)
    if (!job) return undefined
    // A payload from a foreign producer is nobody's job: it is not described (and ends `failed` on a worker).
    const parsed = ExecJobSchema.safeParse(job.data)
    if (!parsed.success) return undefined
    const data = parsed.data
    // The fence's result record lands before BullMQ marks the job completed: it decides first.
    const stored = await fences.result(jobId)
    if (stored) return { job: data, state: 'finished', result: stored }
    const state = await job.getState()
    if (state === 'completed' || state === 'failed') {
      const result = await finishedResult(jobId)
      return { job: data, state: 'finished', ...(result ? { result } : {}) }
    }
    return { job: data, state: state === 'active' ? 'active' : 'waiting' }
  }

  const consumers = new Set<Consumer>()
  let closed = false

  return {
    driver: 'bullmq',

    async submit(input) {
      const job = ExecJobSchema.parse(input)
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
        // The index write goes first on the same connection and the add follows without waiting for
        // its reply (one round trip, not two): Redis runs them in order, so a job in the queue is
        // listed for its tenant. Should the index write alone fail, it is retried once in the
        // background; the job is accepted either way.
        const indexed = index.add(job)
        const [listed, added] = await Promise.allSettled([
          indexed,
          queue.add('exec', job, { jobId: job.jobId }),
        ])
        if (added.status === 'rejected') throw added.reason
        accepted = true
        if (listed.status === 'rejected') void index.add(job).catch(() => undefined)
        // New in the tenant's index: no submit of this id came before (a duplicate add of a job
        // another process submitted at the same moment is not new there, and is checked).
        else fresh = listed.value
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
        const c = await queue.getJobCounts('waiting', 'prioritized', 'delayed', 'active')
        return {
          waiting: (c.waiting ?? 0) + (c.prioritized ?? 0) + (c.delayed ?? 0),
          active: c.active ?? 0,
        }
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
      const consumer = await startBullmqConsumer(
        {
          redisUrl,
          queueName,
          prefix,
          connectTimeoutMs,
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
      const err = new AppError('QUEUE_UNAVAILABLE', 'The job queue closed before the job finished.')
      watches.rejectAll(err)
      // BullMQ leaves connections it was handed open: quit ours.
      const sub = await subscriber?.catch(() => undefined)
      if (sub) await quitRedis(sub.connection)
      await queue.close()
      await quitRedis(command)
    },
  }
}

function messageOf(err: unknown): string {
  return err instanceof Error ? err.message : String(err)
}
