/*
 * The engine queue builds its lanes with the configured driver (queue.driver): a job routed to an
 * engine runs through a lane of that driver, and its keys are that driver's.
 */
import { randomUUID } from 'node:crypto'
import { Redis } from 'ioredis'
import { afterEach, describe, expect, test } from 'vitest'
import { createEngineJobQueue } from '../../../src/queue/engines/engine-queue.js'
import type { EngineJobQueue } from '../../../src/queue/engines/engine-queue.js'
import { laneName } from '../../../src/queue/engines/engine-directory.js'
import type { EngineSide } from '../../../src/queue/engines/engine-consumer.js'
import { RedisQueueKeys } from '../../../src/queue/redis/keys.js'
import { keyspace } from '../../../src/redis/index.js'
import { makeJob } from '../../support/queue-drivers.js'
import { deleteKeys, REDIS_URL } from '../../support/redis.js'
import { ScriptedProcessor } from '../../support/scripted-processor.js'
import { expectSubmitOrGetConforms } from '../../support/submit-or-get.js'

const engine: EngineSide = {
  engineId: 'e1',
  health: () => Promise.resolve({ ok: true }),
  load: () => Promise.resolve({ running: 0, reservedBytes: 0 }),
  memory: () => Promise.resolve(undefined),
  heartbeatMs: 200,
}

let cleanup: (() => Promise<void>) | undefined
afterEach(async () => {
  await cleanup?.()
  cleanup = undefined
})

describe.each(['bullmq', 'redis'] as const)('engine lanes of driver %s', (driver) => {
  test('a routed job runs through a lane of the driver', async () => {
    const prefix = `sbxtest-${randomUUID().slice(0, 8)}`
    const queue: EngineJobQueue = await createEngineJobQueue({
      driver,
      redisUrl: REDIS_URL,
      prefix,
      queueName: 'exec',
      engine,
    })
    cleanup = async () => {
      await queue.close()
      await deleteKeys(`${prefix}:*`)
    }
    expect(queue.driver).toBe(driver)
    const p = new ScriptedProcessor()
    await queue.consume(p.process, { workerId: 'w1' })
    const job = makeJob('echo lane')
    await queue.submit(job)
    expect(await queue.wait(job.jobId, { timeoutMs: 15_000 })).toMatchObject({
      status: 'completed',
      result: { stdout: 'lane\n' },
    })
    const redis = new Redis(REDIS_URL)
    try {
      const jobKey = new RedisQueueKeys(keyspace(prefix).jobs(laneName('exec', 'e1'))).job(job.jobId)
      expect(await redis.exists(jobKey)).toBe(driver === 'redis' ? 1 : 0)
    } finally {
      redis.disconnect()
    }
  })
  test('submitOrGet passes through to the lane: added, then exists with the stored job; alongside written both times', async () => {
    const prefix = `sbxtest-${randomUUID().slice(0, 8)}`
    const queue: EngineJobQueue = await createEngineJobQueue({
      driver,
      redisUrl: REDIS_URL,
      prefix,
      queueName: 'exec',
    })
    cleanup = async () => {
      await queue.close()
      await deleteKeys(`${prefix}:*`)
    }
    // A live engine to route to, with no consumer: the jobs stay waiting.
    await queue.engines.beat('e1', { seenAt: Date.now(), healthy: true, running: 0, workerId: 'w-e1' })
    await expectSubmitOrGetConforms(queue, prefix)
  })
})
