import { Redis } from 'ioredis'
import { afterEach, describe, expect, test } from 'vitest'
import { JobTaker, MAX_TAKE_MORE } from '../../../src/queue/redis/job-store.js'
import { RedisQueueKeys } from '../../../src/queue/redis/keys.js'
import { keyspace } from '../../../src/redis/keyspace.js'
import { makeJob, redisUnderTest } from '../../support/queue-drivers.js'
import type { QueueUnderTest } from '../../support/queue-drivers.js'
import { REDIS_URL } from '../../support/redis.js'

/**
 * The `redis` driver's take: the blocking pop and the take script in one round trip, which takes up
 * to `more` further waiting jobs in the same atomic step (a consumer with free slots drains a backlog
 * in one round trip instead of one per job), each leased to the worker with its attempt counted.
 */
describe('redis driver: one take leases a backlog', () => {
  let q: QueueUnderTest | undefined
  let client: Redis | undefined
  afterEach(async () => {
    client?.disconnect()
    await q?.cleanup()
    q = client = undefined
  })

  test('the popped job and up to `more` waiting ones, oldest first, each leased; nothing left between', async () => {
    q = await redisUnderTest()
    const jobs = [1, 2, 3, 4, 5].map((i) => makeJob(`echo ${i}`))
    for (const j of jobs) await q.queue.submit(j)
    client = new Redis(REDIS_URL)
    const keys = new RedisQueueKeys(keyspace(q.prefix ?? '').jobs('exec'))
    const taker = new JobTaker(client, keys, 'w-take', 4_000)

    const first = await taker.take(1, 3)
    expect(first.popped).toBe(true)
    expect(first.jobs.map((t) => t.jobId)).toEqual(jobs.slice(0, 4).map((j) => j.jobId))
    for (const t of first.jobs) {
      expect(t.attempt).toBe(1)
      expect(t.stalls).toBe(0)
      expect(JSON.parse(t.data)).toMatchObject({ jobId: t.jobId })
      expect(await client.hmget(keys.job(t.jobId), 'state', 'worker')).toEqual(['active', 'w-take'])
      expect(await client.zscore(keys.leases, t.jobId)).not.toBeNull()
    }
    // The pop's pending list is empty again: no job sits between the pop and its lease.
    expect(await client.llen(keys.pending('w-take'))).toBe(0)

    const rest = await taker.take(1, 10)
    expect(rest.jobs.map((t) => t.jobId)).toEqual([jobs[4]?.jobId])
    expect(await client.llen(keys.wait)).toBe(0)
    // Nothing pending: the recovery take says so (the consumer then goes back to blocking pops).
    expect(await taker.takePending(5)).toEqual({ popped: false, jobs: [] })
  })

  test('a popped job that finished meanwhile is dropped; the ones behind it are still taken; `more` is bounded', async () => {
    q = await redisUnderTest()
    const jobs = Array.from({ length: MAX_TAKE_MORE + 3 }, (_, i) => makeJob(`echo ${i}`))
    for (const j of jobs) await q.queue.submit(j)
    client = new Redis(REDIS_URL)
    const keys = new RedisQueueKeys(keyspace(q.prefix ?? '').jobs('exec'))
    await client.hset(keys.job(jobs[0]?.jobId ?? ''), 'state', 'finished')
    const taker = new JobTaker(client, keys, 'w-take', 4_000)

    const taken = await taker.take(1, 1_000)
    expect(taken.popped).toBe(true)
    // The finished one is dropped; the script took MAX_TAKE_MORE more behind it, no further.
    expect(taken.jobs.map((t) => t.jobId)).toEqual(jobs.slice(1, MAX_TAKE_MORE + 1).map((j) => j.jobId))
    expect(await client.llen(keys.wait)).toBe(2)
  })
})
