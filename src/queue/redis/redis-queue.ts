import { openRedisQueueBase, redisJobQueue, unknownJob } from '../redis-common/queue-shell.js'
import type { RedisKindOptions, RedisQueueBaseOptions } from '../redis-common/queue-shell.js'
import type { ExecJob, ExecResult, QueueJob } from '../schemas.js'
import { STALL_DETECTION } from '../redis-common/stall-detection.js'
import { OUTPUT_LOG_CAP_BYTES } from '../output-log.js'
import type { JobKind, JobQueue } from '../types.js'
import { RedisJobStore } from './job-store.js'
import { RedisQueueKeys } from './keys.js'
import { startRedisConsumer } from './redis-consumer.js'
import type { RedisConsumerTuning } from './redis-consumer.js'

/** Options of {@link createRedisJobQueue}. */
export interface RedisQueueOptions extends RedisQueueBaseOptions, RedisConsumerTuning {}

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
export async function createRedisJobQueue(options?: RedisQueueOptions): Promise<JobQueue>
export async function createRedisJobQueue<TJob extends QueueJob, TValue>(
  options: RedisQueueOptions & RedisKindOptions<TJob, TValue>,
): Promise<JobQueue<TJob, TValue>>
export async function createRedisJobQueue(
  options: RedisQueueOptions & { kind?: JobKind<QueueJob, unknown> } = {},
): Promise<JobQueue<QueueJob, unknown> | JobQueue<ExecJob, ExecResult>> {
  const base = await openRedisQueueBase(options)
  const { redisUrl, queueName, connectTimeoutMs, command, fences, index, space, retentionMs, kind } = base
  const store = new RedisJobStore(command, new RedisQueueKeys(space.jobs(queueName)), fences.keys, index, {
    retentionMs,
    leaseMs: options.lockDurationMs ?? STALL_DETECTION.lockDurationMs,
    logCapBytes: options.outputLogCapBytes ?? OUTPUT_LOG_CAP_BYTES,
  })
  return redisJobQueue(base, {
    driver: 'redis',
    add: (job) => store.add(job),
    async addOrGet(job, alongside, slots) {
      const r = await store.addOrGet(job, alongside, slots)
      if (r.added) return { added: true }
      if ('overCap' in r) return { added: false, overCap: r.overCap }
      const { data, state, result } = r.stored
      return { added: false, raw: { data: safeJson(data), info: { state, ...(result ? { result } : {}) } } }
    },
    async finishedResult(jobId) {
      const stored = await store.read(jobId)
      if (!stored) throw unknownJob(jobId)
      return stored.result
    },
    async inspect(jobId) {
      const stored = await store.read(jobId)
      if (!stored) return undefined
      const { state, result } = stored
      return { data: safeJson(stored.data), info: { state, ...(result ? { result } : {}) } }
    },
    counts: () => store.counts(),
    consume: (processor, opts, subscriber) =>
      startRedisConsumer(
        {
          redisUrl,
          queueName,
          connectTimeoutMs,
          store,
          fences,
          fenceClient: command,
          subscriber,
          tuning: options,
          kind,
        },
        processor,
        opts,
      ),
    close: async () => undefined,
  })
}

function safeJson(text: string): unknown {
  try {
    return JSON.parse(text)
  } catch {
    return undefined
  }
}
