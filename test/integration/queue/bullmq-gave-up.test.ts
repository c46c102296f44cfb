import { randomUUID } from 'node:crypto'
import { EventEmitter, once } from 'node:events'
import { Redis } from 'ioredis'
import { afterEach, expect, test } from 'vitest'
import { createBullmqJobQueue } from '../../../src/queue/index.js'
import type { JobProcessor, JobQueue } from '../../../src/queue/index.js'
import { makeJob } from '../../support/queue-drivers.js'
import { deleteKeys, REDIS_URL } from '../../support/redis.js'

let cleanup: (() => Promise<void>) | undefined
afterEach(async () => {
  await cleanup?.()
  cleanup = undefined
})

/*
 * A job BullMQ fails itself (stalled more often than maxStalledCount) never reaches the fence's
 * finish in runJob. The API process no longer reads BullMQ's event stream: the worker that failed
 * the job stores and publishes its result, so a waiter in another process learns it at once.
 */
test('a job BullMQ gave up on (stalled too often) reaches a waiter in another process as interrupted', async () => {
  const prefix = `sbxtest-${randomUUID().slice(0, 8)}`
  const options = {
    redisUrl: REDIS_URL,
    prefix,
    queueName: 'exec',
    lockDurationMs: 1_000,
    stalledIntervalMs: 200,
    maxStalledCount: 0,
  }
  const worker: JobQueue = await createBullmqJobQueue(options)
  const api: JobQueue = await createBullmqJobQueue(options)
  const redis = new Redis(REDIS_URL)
  const started = new EventEmitter()
  let unblock!: () => void
  const blocked = new Promise<void>((resolve) => (unblock = resolve))
  // Holds the job past its lock, ignoring its signal: only BullMQ's stalled check ends it.
  const processor: JobProcessor = async (job, ctx) => {
    ctx.publish({ stream: 'stdout', data: 'started\n' })
    started.emit('started', job.jobId)
    await blocked
    return { status: 'cancelled', reason: 'released by the test' }
  }
  cleanup = async () => {
    unblock()
    await Promise.all([worker.close(), api.close()])
    redis.disconnect()
    await deleteKeys(`${prefix}:*`)
  }
  await worker.consume(processor, { concurrency: 2, workerId: 'w1' })
  const job = makeJob('sleep 600')
  const isStarted = once(started, 'started')
  await api.submit(job)
  await isStarted
  const waiting = api.wait(job.jobId, { timeoutMs: 15_000 })
  // The lock lapses as if its worker died: the stalled check finds it twice and fails it.
  await redis.del(`${prefix}:exec:${job.jobId}:lock`)
  const result = await waiting
  expect(result).toMatchObject({ status: 'interrupted' })
  expect(JSON.stringify(result)).toContain('stalled more than allowable limit')
})
