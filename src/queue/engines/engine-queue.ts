import { AppError } from '../../errors.js'
import { createBullmqJobQueue } from '../bullmq/bullmq-queue.js'
import type { BullmqQueueOptions } from '../bullmq/bullmq-queue.js'
import { createRedisJobQueue } from '../redis/redis-queue.js'
import {
  connectRedis,
  createRedisClient,
  isRedisUnreachable,
  QUEUE_NAMES,
  queueUnavailable,
  quitRedis,
} from '../../redis/index.js'
import { ExecJobSchema } from '../schemas.js'
import type { ExecJob } from '../schemas.js'
import type { ConsumeOptions, Consumer, JobInfo, JobProcessor, JobQueue } from '../types.js'
import { EngineDirectory, laneName } from './engine-directory.js'
import { startEngineConsumer } from './engine-consumer.js'
import type { EngineSide } from './engine-consumer.js'
import { trackedConsumer } from '../tracked-consumer.js'

/** Options of {@link createEngineJobQueue}. */
export interface EngineJobQueueOptions extends BullmqQueueOptions {
  /** The driver of every lane (both take the same options). @default 'bullmq' */
  driver?: 'bullmq' | 'redis'
  /** An engine not reached for this long counts as down: no placements, and its lane is adopted (ms). @default 3000 */
  engineStaleMs?: number
  /** The engine beside this process, for {@link JobQueue.consume} (workers only). */
  engine?: EngineSide
  /** The memory limit a new sandbox for the job takes (bytes), weighed by placement. @default 0 */
  memoryOf?: (job: ExecJob) => number
}

/** A {@link JobQueue} whose jobs go to one lane per engine, with the directory it routes by. */
export interface EngineJobQueue extends JobQueue {
  readonly engines: EngineDirectory
}

/** How many job routes one process remembers (its own submissions: their waits cost no lookup). */
const ROUTE_CACHE_SIZE = 10_000

/**
 * The fleet queue over many Docker engines: one lane (a full queue of `driver`,
 * {@link createBullmqJobQueue} or {@link createRedisJobQueue}, queue `<queue>-<engine id>`) per engine, so fencing, cancel, redelivery, idempotent ids and the
 * Redis-outage handling hold per engine unchanged. `submit` routes each job in one Redis step (the
 * session's engine, else placement on the healthiest engine with room, see {@link EngineDirectory});
 * every other call finds the job's lane by its id. Workers consume their own engine's lane and adopt
 * the lanes of engines that are down (see engine-consumer.ts).
 */
export async function createEngineJobQueue(options: EngineJobQueueOptions = {}): Promise<EngineJobQueue> {
  const redisUrl = options.redisUrl ?? 'redis://127.0.0.1:6379'
  const queueName = options.queueName ?? QUEUE_NAMES.exec
  const prefix = options.prefix ?? 'sbx'
  const { engine, engineStaleMs, memoryOf, driver = 'bullmq', ...laneOptions } = options
  const createLane = driver === 'redis' ? createRedisJobQueue : createBullmqJobQueue
  const command = createRedisClient(redisUrl, 'command', `sbx-engines:${queueName}`)
  await connectRedis(command, redisUrl, options.connectTimeoutMs ?? 5_000)
  const engines = new EngineDirectory(command, {
    prefix,
    ...(engineStaleMs === undefined ? {} : { staleMs: engineStaleMs }),
    ...(options.retentionMs === undefined ? {} : { retentionMs: options.retentionMs }),
  })
  const lanes = new Map<string, Promise<JobQueue>>()
  const lane = (engineId: string): Promise<JobQueue> => {
    let q = lanes.get(engineId)
    if (!q) {
      q = createLane({ ...laneOptions, queueName: laneName(queueName, engineId) })
      q.catch(() => lanes.delete(engineId))
      lanes.set(engineId, q)
    }
    return q
  }
  const routes = new Map<string, string>()
  const remember = (jobId: string, engineId: string): void => {
    if (routes.size >= ROUTE_CACHE_SIZE) {
      const oldest = routes.keys().next()
      if (!oldest.done) routes.delete(oldest.value)
    }
    routes.set(jobId, engineId)
  }
  const laneOf = async (jobId: string): Promise<JobQueue | undefined> => {
    const known = routes.get(jobId) ?? (await engines.laneOf(jobId))
    return known === undefined ? undefined : lane(known)
  }
  const allLanes = async (): Promise<JobQueue[]> => {
    const ids = new Set([...(await engines.list()).map((e) => e.id), ...lanes.keys()])
    return Promise.all([...ids].map(lane))
  }
  const notFound = (jobId: string) =>
    new AppError('NOT_FOUND', `No job ${jobId} in the queue: never submitted, or past retention.`)
  /** The lane of the job's engine: the one it was routed to before, else its session's or a placement. */
  const laneFor = async (job: ExecJob): Promise<JobQueue> => {
    let route
    try {
      route = await engines.route(job, Date.now(), memoryOf?.(job) ?? 0)
    } catch (err) {
      throw new AppError(
        'QUEUE_UNAVAILABLE',
        `Could not route job ${job.jobId} to an engine: Redis is unreachable (${(err as Error).message}); ` +
          'the job was not accepted: submit it again once Redis is back.',
        { retryable: true, cause: err },
      )
    }
    if ('none' in route) {
      throw new AppError(
        route.live === 0 ? 'UNAVAILABLE' : 'QUOTA_EXCEEDED',
        route.live === 0
          ? `No live Docker engine for job ${job.jobId}: no worker reached its engine in the last ` +
              `${engines.staleMs} ms (or every engine is drained); start \`sbx worker\` beside an engine, ` +
              'or `sbx engine undrain <id>`. The job was not accepted.'
          : `Every live Docker engine (${route.live}) is at its sandbox cap (providers.docker.maxSandboxes) ` +
              'or its memory capacity (providers.docker.memoryCapacityMb); delete sessions, add an engine, ' +
              'or raise the cap. The job was not accepted.',
        { retryable: true },
      )
    }
    remember(job.jobId, route.engineId)
    return lane(route.engineId)
  }

  const consumers = new Set<Consumer>()
  let closed = false

  return {
    driver,
    // Every lane's add script counts in the same tenant slots (the deployment's keyspace).
    countsTenantJobs: driver === 'redis',
    engines,

    async submit(input) {
      const job = ExecJobSchema.parse(input)
      return (await laneFor(job)).submit(job)
    },

    // A resubmission routes to the lane that holds the job; its lane answers it (under `redis`, in
    // its add script).
    async submitOrGet(input, opts) {
      const job = ExecJobSchema.parse(input)
      return (await laneFor(job)).submitOrGet(job, opts)
    },

    async wait(jobId, opts) {
      const deadline = Date.now() + opts.timeoutMs
      // Redis away while the lane is looked up: an accepted job is still waited for, until the deadline.
      for (;;) {
        try {
          const q = await laneOf(jobId)
          if (!q) throw notFound(jobId)
          return await q.wait(jobId, { ...opts, timeoutMs: Math.max(1, deadline - Date.now()) })
        } catch (err) {
          if (!isRedisUnreachable(err) || Date.now() >= deadline) throw err
          opts.signal?.throwIfAborted()
          await new Promise((r) => setTimeout(r, 250))
        }
      }
    },

    async getResult(jobId) {
      const q = await laneOf(jobId).catch((err: unknown) => {
        throw queueUnavailable(err, `Reading the result of job ${jobId}`)
      })
      return q?.getResult(jobId)
    },

    async inspect(jobId) {
      const q = await laneOf(jobId).catch((err: unknown) => {
        throw queueUnavailable(err, `Looking up job ${jobId}`)
      })
      return q?.inspect(jobId)
    },

    async list(tenant, opts) {
      const all = await Promise.all(
        (
          await allLanes().catch((err: unknown) => {
            throw queueUnavailable(err, `Listing the jobs of tenant ${tenant}`)
          })
        ).map((q) => q.list(tenant, opts)),
      )
      return all
        .flat()
        .sort((a: JobInfo, b: JobInfo) => b.job.submittedAt - a.job.submittedAt)
        .slice(0, opts.limit)
    },

    async counts() {
      const lanesNow = await allLanes().catch((err: unknown) => {
        throw queueUnavailable(err, 'Counting jobs')
      })
      const each = await Promise.all(lanesNow.map((q) => q.counts()))
      return each.reduce((a, c) => ({ waiting: a.waiting + c.waiting, active: a.active + c.active }), {
        waiting: 0,
        active: 0,
      })
    },

    async subscribeOutput(jobId, listener) {
      const q = await laneOf(jobId)
      if (!q) throw notFound(jobId)
      return q.subscribeOutput(jobId, listener)
    },

    async readOutput(jobId) {
      const q = await laneOf(jobId).catch((err: unknown) => {
        throw queueUnavailable(err, `Reading the live output of job ${jobId}`)
      })
      return q ? q.readOutput(jobId) : []
    },

    async cancel(jobId, reason) {
      const q = await laneOf(jobId).catch((err: unknown) => {
        throw queueUnavailable(err, `Cancelling job ${jobId}`)
      })
      await q?.cancel(jobId, reason)
    },

    async consume(processor: JobProcessor, opts: ConsumeOptions = {}) {
      if (!engine)
        throw new AppError(
          'CONFIG_INVALID',
          'This queue has no engine to consume for: pass `engine` (workers only).',
        )
      const consumer = await startEngineConsumer({ engines, lane, engine }, processor, opts)
      return trackedConsumer(consumers, consumer)
    },

    async close() {
      if (closed) return
      closed = true
      await Promise.all([...consumers].map((c) => c.close({ deadlineMs: 0 })))
      const opened = await Promise.allSettled(lanes.values())
      await Promise.all(opened.map((o) => (o.status === 'fulfilled' ? o.value.close() : undefined)))
      await quitRedis(command)
    },
  }
}
