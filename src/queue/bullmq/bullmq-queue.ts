import { Queue } from 'bullmq'
import { openRedisQueueBase, redisJobQueue, unknownJob } from '../redis-common/queue-shell.js'
import type { RedisKindOptions, RedisQueueBaseOptions } from '../redis-common/queue-shell.js'
import { JobResultSchema } from '../schemas.js'
import type { ExecJob, ExecResult, JobResult, QueueJob } from '../schemas.js'
import type { JobKind, JobQueue } from '../types.js'
import { queueGaveUp, startBullmqConsumer } from './bullmq-consumer.js'
import type { BullmqConsumerTuning } from './bullmq-consumer.js'

/** Options of {@link createBullmqJobQueue} (the queue name and prefix are BullMQ's). */
export interface BullmqQueueOptions extends RedisQueueBaseOptions, BullmqConsumerTuning {}

/**
 * The fleet queue: BullMQ on Redis. Producers fail fast while Redis is down (QUEUE_UNAVAILABLE: submit,
 * inspect, cancel, subscriptions), while `wait` on an accepted job rides out an outage until its
 * timeout (the job is checked again when the connection comes back); results arrive on the job's
 * channel (one pattern subscription per process) and are checked in the fence's result record; live output and cancel requests travel over Redis pub/sub;
 * fence records make redeliveries safe (see ../fence.ts).
 */
export async function createBullmqJobQueue(options?: BullmqQueueOptions): Promise<JobQueue>
export async function createBullmqJobQueue<TJob extends QueueJob, TValue>(
  options: BullmqQueueOptions & RedisKindOptions<TJob, TValue>,
): Promise<JobQueue<TJob, TValue>>
export async function createBullmqJobQueue(
  options: BullmqQueueOptions & { kind?: JobKind<QueueJob, unknown> } = {},
): Promise<JobQueue<QueueJob, unknown> | JobQueue<ExecJob, ExecResult>> {
  const base = await openRedisQueueBase(options)
  const { redisUrl, queueName, prefix, connectTimeoutMs, command, fences, index, retentionMs, kind } = base
  const retention = { age: Math.ceil(retentionMs / 1000) }
  const queue = new Queue(queueName, {
    connection: command,
    prefix,
    defaultJobOptions: { removeOnComplete: retention, removeOnFail: retention, attempts: 1 },
    streams: { events: { maxLen: 2_000 } },
  })
  queue.on('error', () => undefined)

  const finishedResult = async (jobId: string): Promise<JobResult | undefined> => {
    const stored = await fences.result(jobId)
    if (stored) return stored
    const job = await queue.getJob(jobId)
    if (!job) throw unknownJob(jobId)
    if (!job.finishedOn) return undefined
    if (job.failedReason) return queueGaveUp(job.failedReason)
    return JobResultSchema.parse(job.returnvalue)
  }

  return redisJobQueue(base, {
    driver: 'bullmq',
    async add(job) {
      // The index write goes first on the same connection and the add follows without waiting for
      // its reply (one round trip, not two): Redis runs them in order, so a job in the queue is
      // listed for its tenant. Should the index write alone fail, it is retried once in the
      // background; the job is accepted either way.
      const indexed = index.add(job)
      const [listed, added] = await Promise.allSettled([
        indexed,
        queue.add(kind.name, job, { jobId: job.jobId }),
      ])
      if (added.status === 'rejected') throw added.reason
      if (listed.status === 'rejected') {
        void index.add(job).catch(() => undefined)
        return false
      }
      // New in the tenant's index: no submit of this id came before (a duplicate add of a job
      // another process submitted at the same moment is not new there, and is checked).
      return listed.value
    },
    finishedResult,
    async inspect(jobId) {
      const job = await queue.getJob(jobId)
      if (!job) return undefined
      // The fence's result record lands before BullMQ marks the job completed: it decides first.
      const stored = await fences.result(jobId)
      if (stored) return { data: job.data, info: { state: 'finished', result: stored } }
      const state = await job.getState()
      if (state === 'completed' || state === 'failed') {
        const result = await finishedResult(jobId)
        return { data: job.data, info: { state: 'finished', ...(result ? { result } : {}) } }
      }
      return { data: job.data, info: { state: state === 'active' ? 'active' : 'waiting' } }
    },
    async counts() {
      const c = await queue.getJobCounts('waiting', 'prioritized', 'delayed', 'active')
      return {
        waiting: (c.waiting ?? 0) + (c.prioritized ?? 0) + (c.delayed ?? 0),
        active: c.active ?? 0,
      }
    },
    consume: (processor, opts, subscriber) =>
      startBullmqConsumer(
        {
          redisUrl,
          queueName,
          prefix,
          connectTimeoutMs,
          fences,
          fenceClient: command,
          subscriber,
          tuning: options,
          kind,
        },
        processor,
        opts,
      ),
    close: () => queue.close(),
  })
}
