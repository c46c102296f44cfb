import { createBullmqJobQueue } from './bullmq/bullmq-queue.js'
import type { BullmqQueueOptions } from './bullmq/bullmq-queue.js'
import { createRedisJobQueue } from './redis/redis-queue.js'
import type { RedisQueueOptions } from './redis/redis-queue.js'
import { createInProcessJobQueue } from './in-process-queue.js'
import type { InProcessQueueOptions } from './in-process-queue.js'
import type { ExecJob, ExecResult, QueueJob } from './schemas.js'
import type { JobKind, JobQueue } from './types.js'

/**
 * Which queue to build: the embedded default (`in-process`; `memory` is its name in the config file),
 * or, for a fleet, BullMQ on Redis (`bullmq`) or the job lifecycle of our own on Redis (`redis`).
 */
export type JobQueueConfig =
  | ({ driver: 'in-process' | 'memory' } & InProcessQueueOptions)
  | ({ driver: 'bullmq' } & BullmqQueueOptions)
  | ({ driver: 'redis' } & RedisQueueOptions)

/**
 * Builds the configured {@link JobQueue} (connecting to Redis for `bullmq` and `redis`; fails fast when
 * it is down). With a `kind`, a queue of that job kind (give it a `queueName` of its own on Redis);
 * without, of exec jobs.
 */
export async function createJobQueue(config: JobQueueConfig): Promise<JobQueue>
export async function createJobQueue<TJob extends QueueJob, TValue>(
  config: JobQueueConfig & { kind: JobKind<TJob, TValue> },
): Promise<JobQueue<TJob, TValue>>
export async function createJobQueue(
  config: JobQueueConfig & { kind?: JobKind<QueueJob, unknown> },
): Promise<JobQueue<QueueJob, unknown> | JobQueue<ExecJob, ExecResult>> {
  switch (config.driver) {
    case 'in-process':
    case 'memory': {
      const { driver: _driver, kind, ...options } = config
      return kind ? createInProcessJobQueue({ ...options, kind }) : createInProcessJobQueue(options)
    }
    case 'bullmq': {
      const { driver: _driver, kind, ...options } = config
      return kind ? createBullmqJobQueue({ ...options, kind }) : createBullmqJobQueue(options)
    }
    case 'redis': {
      const { driver: _driver, kind, ...options } = config
      return kind ? createRedisJobQueue({ ...options, kind }) : createRedisJobQueue(options)
    }
  }
}
