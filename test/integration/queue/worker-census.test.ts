/*
 * The worker census (/readyz `workers`) under the `redis` queue driver counts the exec consumers whose
 * heartbeat is live (its consumers hold no BullMQ connection for CLIENT LIST to find).
 */
import { randomUUID } from 'node:crypto'
import { afterEach, expect, test } from 'vitest'
import { createRedisJobQueue } from '../../../src/queue/index.js'
import type { JobQueue } from '../../../src/queue/index.js'
import { createWorkerCensus, EXEC_QUEUE } from '../../../src/worker/worker-census.js'
import type { WorkerCensus } from '../../../src/worker/worker-census.js'
import { deleteKeys, REDIS_URL } from '../../support/redis.js'
import { ScriptedProcessor } from '../../support/scripted-processor.js'

let queue: JobQueue | undefined
let census: WorkerCensus | undefined
const prefix = `sbxtest-${randomUUID().slice(0, 8)}`
afterEach(async () => {
  await queue?.close()
  await census?.close()
  await deleteKeys(`${prefix}:*`)
})

test('redis driver: exec workers are counted by live heartbeat, and leave on close', async () => {
  census = createWorkerCensus(REDIS_URL, prefix, 0, undefined, 'redis')
  expect(await census.count(EXEC_QUEUE)).toBe(0)
  queue = await createRedisJobQueue({ redisUrl: REDIS_URL, prefix, queueName: EXEC_QUEUE })
  const consumer = await queue.consume(new ScriptedProcessor().process, { workerId: 'w1' })
  expect(await census.count(EXEC_QUEUE)).toBe(1)
  await consumer.close()
  expect(await census.count(EXEC_QUEUE)).toBe(0)
})
