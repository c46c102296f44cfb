import { createBullmqJobQueue } from './bullmq/bullmq-queue.js'
import type { BullmqQueueOptions } from './bullmq/bullmq-queue.js'
import { createRedisJobQueue } from './redis/redis-queue.js'
import type { RedisQueueOptions } from './redis/redis-queue.js'
import { createInProcessJobQueue } from './in-process-queue.js'
import type { InProcessQueueOptions } from './in-process-queue.js'
import type { JobQueue } from './types.js'

/**
 * Which queue to build: the embedded default (`in-process`; `memory` is its name in the config file),
 * or, for a fleet, BullMQ on Redis (`bullmq`) or the job lifecycle of our own on Redis (`redis`).
 */
export type JobQueueConfig =
  | ({ driver: 'in-process' | 'memory' } & InProcessQueueOptions)
  | ({ driver: 'bullmq' } & BullmqQueueOptions)
  | ({ driver: 'redis' } & RedisQueueOptions)

/** Builds the configured {@link JobQueue} (connecting to Redis for `bullmq` and `redis`; fails fast when it is down). */
export async function createJobQueue(config: JobQueueConfig): Promise<JobQueue> {
  switch (config.driver) {
    case 'in-process':
    case 'memory': {
      const { driver: _driver, ...options } = config
      return createInProcessJobQueue(options)
    }
    case 'bullmq': {
      const { driver: _driver, ...options } = config
      return createBullmqJobQueue(options)
    }
    case 'redis': {
      const { driver: _driver, ...options } = config
      return createRedisJobQueue(options)
    }
  }
}
