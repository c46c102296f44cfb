import { Redis } from 'ioredis'
import { afterEach, describe, expect, test } from 'vitest'
import type { Consumer } from '../../../src/queue/index.js'
import { keyspace } from '../../../src/redis/keyspace.js'
import { bullmqUnderTest, makeJob, redisUnderTest } from '../../support/queue-drivers.js'
import type { QueueUnderTest } from '../../support/queue-drivers.js'
import { ScriptedProcessor } from '../../support/scripted-processor.js'
import { REDIS_URL } from '../../support/redis.js'

const WAIT = { timeoutMs: 15_000 }
const CAP = { cap: 2, holdMs: 60_000 }

/**
 * The tenant's cap on jobs queued or running (`quotas.maxConcurrentJobs`) under the `redis` driver:
 * the add script counts them in one set for every process of the fleet, and frees the slots of jobs
 * that ended (or outlived their deadline) only when the cap is reached.
 */
describe('redis driver: tenant job slots', () => {
  let q: QueueUnderTest | undefined
  let consumer: Consumer | undefined
  afterEach(async () => {
    await consumer?.close()
    await q?.cleanup()
    q = consumer = undefined
  })

  test('past the cap a new job is not added; an existing id is still answered; a job that ended frees its slot; other tenants are apart', async () => {
    q = await redisUnderTest()
    expect(q.queue.countsTenantJobs).toBe(true)
    const p = new ScriptedProcessor()
    consumer = await q.queue.consume(p.process, { concurrency: 4, workerId: 'w1' })
    const [a, b] = [makeJob('block'), makeJob('block')]
    for (const j of [a, b])
      expect(await q.queue.submitOrGet(j, { tenantJobs: CAP })).toEqual({ kind: 'added' })
    const over = makeJob('echo over')
    expect(await q.queue.submitOrGet(over, { tenantJobs: CAP })).toEqual({ kind: 'over-cap', count: 2 })
    // Nothing of it was stored: it is unknown, and the queue holds two jobs.
    expect(await q.queue.inspect(over.jobId)).toBeUndefined()
    // A resubmission is answered whatever the cap says (the idempotency answer comes first).
    expect((await q.queue.submitOrGet(a, { tenantJobs: CAP })).kind).toBe('exists')
    // Another handle (another API process) counts the same slots; another tenant has its own.
    const other = await q.reopen()
    expect(await other.submitOrGet(makeJob('echo x'), { tenantJobs: CAP })).toMatchObject({
      kind: 'over-cap',
    })
    const globex = makeJob('echo globex', { tenant: 'globex' })
    expect(await other.submitOrGet(globex, { tenantJobs: CAP })).toEqual({ kind: 'added' })
    // One ends: the next add frees its slot and takes it.
    await p.started(a.jobId)
    p.release(a.jobId)
    expect((await q.queue.wait(a.jobId, WAIT)).status).toBe('completed')
    const next = makeJob('echo next')
    expect(await other.submitOrGet(next, { tenantJobs: CAP })).toEqual({ kind: 'added' })
    expect((await q.queue.wait(next.jobId, WAIT)).status).toBe('completed')
    await p.started(b.jobId)
    p.release(b.jobId)
    await q.queue.wait(b.jobId, WAIT)
  })

  test('a slot whose job was never seen to end is freed once its deadline passed', async () => {
    q = await redisUnderTest()
    // No consumer: the jobs wait. A hold already over stands for jobs whose end was lost.
    for (let i = 0; i < 2; i++) {
      expect(
        await q.queue.submitOrGet(makeJob(`echo ${i}`), { tenantJobs: { cap: 2, holdMs: -1_000 } }),
      ).toEqual({
        kind: 'added',
      })
    }
    const slots = `${keyspace(q.prefix ?? '').tenantJobs}acme`
    const redis = new Redis(REDIS_URL)
    try {
      expect(await redis.zcard(slots)).toBe(2)
      expect(await q.queue.submitOrGet(makeJob('echo 2'), { tenantJobs: CAP })).toEqual({ kind: 'added' })
      expect(await redis.zcard(slots)).toBe(1)
      // The slots key expires with the tenant's index.
      expect(await redis.pttl(slots)).toBeGreaterThan(0)
    } finally {
      redis.disconnect()
    }
  })

  test('bullmq does not count for the fleet (the exec service counts per process there)', async () => {
    q = await bullmqUnderTest()
    expect(q.queue.countsTenantJobs).toBe(false)
    for (let i = 0; i < 3; i++) {
      expect(await q.queue.submitOrGet(makeJob(`echo ${i}`), { tenantJobs: CAP })).toEqual({ kind: 'added' })
    }
  })
})
