import { Queue } from 'bullmq'
import { AppError } from '../../errors.js'
import { OUTPUT_LOG_CAP_BYTES, parseLoggedMessage } from '../output-log.js'
import { ExecJobResultSchema, ExecJobSchema } from '../schemas.js'
import type { ExecJobResult } from '../schemas.js'
import type { Consumer, JobInfo, JobQueue, Unsubscribe } from '../types.js'
import { boundedWait } from '../wait-for.js'
import { queueGaveUp, startBullmqConsumer } from './bullmq-consumer.js'
import type { BullmqConsumerTuning } from './bullmq-consumer.js'
import {
  connectRedis,
  createRedisClient,
  isRedisUnreachable,
  keyspace,
  QUEUE_NAMES,
  queueUnavailable,
  quitRedis,
} from '../../redis/index.js'
import { FenceKeys, RedisFenceStore } from './redis-fence.js'
import { Subscriber } from './subscriber.js'
import { TenantJobIndex } from './tenant-index.js'
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
  // Pending waits check their job again whenever the connection comes back (after a Redis outage the
  // pub/sub 'done' message may have been lost, and a wait may have started without listeners).
  const rechecks = new Set<() => void>()
  command.on('ready', () => {
    for (const recheck of [...rechecks]) recheck()
  })
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

  const watches = new Map<string, Watch>()
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
      sub.onResubscribed(() => {
        for (const recheck of [...rechecks]) recheck()
      })
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
  const pendingWaits = new Set<(err: unknown) => void>()

  /**
   * Opens (or joins) the watch of a job: its result arrives as the fence's 'done' publish on the job
   * channel (the process's one pattern subscription carries it; a job BullMQ gave up on is published
   * the same way by the worker that failed it, see bullmq-consumer.ts). The listener is in place
   * before the job is checked, since it may have finished before. While Redis is away it may not
   * start: the watch goes on regardless (an accepted job runs once Redis is back) and the job is
   * checked again each time the command connection or the subscription comes back (a publish made
   * meanwhile is lost, the stored result is not), and once more when the wait ends without a result.
   */
  const openWatch = async (jobId: string, opts: { deferCheck?: boolean } = {}): Promise<Watch> => {
    const open = watches.get(jobId)
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
      finishedResult(jobId).then(
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
        const sub = await getSubscriber().catch(() => undefined)
        const onDone = (message: string): void => {
          if (message[0] !== 'd') return
          let raw: unknown
          try {
            raw = JSON.parse(message.slice(1))
          } catch {
            return
          }
          const parsed = ExecJobResultSchema.safeParse(raw)
          if (parsed.success) settle({ result: parsed.data })
        }
        offDone = await sub?.on(fences.keys.jobChannel(jobId), onDone).catch(() => undefined)
        if (stopped) {
          void offDone?.().catch(() => undefined)
          return
        }
        listening = offDone !== undefined
        rechecks.add(recheck)
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
      release() {
        watch.refs -= 1
        if (watch.refs > 0) return
        stopped = true
        if (watches.get(jobId) === watch) watches.delete(jobId)
        rechecks.delete(recheck)
        // Off the caller's path: the result is already in hand.
        offDone?.().catch(() => undefined)
      },
    }
    watches.set(jobId, watch)
    await watch.ready
    return watch
  }
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
      const watch = connected ? await openWatch(job.jobId, { deferCheck: true }) : undefined
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

    async wait(jobId, opts) {
      opts.signal?.throwIfAborted()
      // Every wait of one job in this process shares one watch (listeners, the check, rechecks): the
      // API's answer and the tenant's job-slot release cost Redis one check, not two.
      const watch = await openWatch(jobId)
      try {
        return await boundedWait<ExecJobResult>(jobId, opts, (resolve, reject) => {
          const follower: Follower = (o) => ('result' in o ? resolve(o.result) : reject(o.error))
          pendingWaits.add(reject)
          watch.follow(follower)
          return () => {
            watch.unfollow(follower)
            pendingWaits.delete(reject)
          }
        })
      } finally {
        watch.release()
      }
    },

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
      for (const reject of pendingWaits) reject(err)
      // BullMQ leaves connections it was handed open: quit ours.
      const sub = await subscriber?.catch(() => undefined)
      if (sub) await quitRedis(sub.connection)
      await queue.close()
      await quitRedis(command)
    },
  }
}

type Outcome = { result: ExecJobResult } | { error: unknown }
type Follower = (outcome: Outcome) => void

/** The shared wait of one job in one process (see `openWatch`). */
interface Watch {
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

function messageOf(err: unknown): string {
  return err instanceof Error ? err.message : String(err)
}
