import { afterEach, describe, expect, test } from 'vitest'
import { Redis } from 'ioredis'
import { createRedisJobQueue } from '../../../src/queue/index.js'
import { keyspace } from '../../../src/redis/index.js'
import { RedisQueueKeys } from '../../../src/queue/redis/keys.js'
import { bullmqUnderTest, makeJob, redisUnderTest } from '../../support/queue-drivers.js'
import type { QueueFactory, QueueUnderTest } from '../../support/queue-drivers.js'
import { REDIS_URL } from '../../support/redis.js'
import { ScriptedProcessor } from '../../support/scripted-processor.js'
import { CONSUMER_FIXTURE, WorkerChild } from '../../support/worker-child.js'

const WAIT = { timeoutMs: 20_000 }
/** Short leases, so a dead consumer's job comes back within about a second. */
const TUNING = { lockDurationMs: 1_000, stalledIntervalMs: 200 }

let q: QueueUnderTest | undefined
let child: WorkerChild | undefined
afterEach(async () => {
  await child?.kill()
  child = undefined
  await q?.cleanup()
  q = undefined
})

/*
 * A consumer killed without close (SIGKILL, as a crashed machine) hands nothing back: its job comes
 * back through the lease (lock) lapsing and the stalled sweep, to another consumer, whose fence decides.
 */
describe.each([
  ['bullmq', bullmqUnderTest],
  ['redis', redisUnderTest],
] as const satisfies ReadonlyArray<readonly [string, QueueFactory]>)(
  'a consumer killed mid-job (%s)',
  (driver, factory) => {
    const killMidJob = async (idempotent: boolean) => {
      q = await factory(TUNING)
      const prefix = q.prefix as string
      child = await WorkerChild.start(
        { scope: prefix, queuePrefix: prefix, sessionPrefix: prefix },
        'w-dead',
        {
          SBX_QUEUE_DRIVER: driver,
          SBX_LOCK_MS: String(TUNING.lockDurationMs),
          SBX_STALLED_MS: String(TUNING.stalledIntervalMs),
        },
        CONSUMER_FIXTURE,
      )
      const job = makeJob('block', { idempotent })
      // The first attempt's output is in Redis before the kill: a consumer sends a chunk at the end of
      // its event-loop turn (the redis driver holds it that long for a finish to carry), so a kill
      // right after the processor's own report could come before it.
      let onOutput!: () => void
      const output = new Promise<void>((resolve) => (onOutput = resolve))
      const off = await q.queue.subscribeOutput(job.jobId, () => onOutput())
      await q.queue.submit(job)
      await child.next((l) => l.event === 'start' && l.jobId === job.jobId)
      await output
      await off()
      await child.kill()
      const p = new ScriptedProcessor()
      await q.queue.consume(p.process, { workerId: 'w2' })
      return { job, p }
    }

    test('a non-idempotent job is redelivered and fenced: interrupted, with the first attempt and its output', async () => {
      const { job, p } = await killMidJob(false)
      const r = await q!.queue.wait(job.jobId, WAIT)
      expect(r).toMatchObject({
        status: 'interrupted',
        previous: { attempt: 1, workerId: 'w-dead', sandboxId: 'sb-test' },
      })
      expect(r.status === 'interrupted' && r.stdout).toBe('started\n')
      expect(p.runs).toEqual([])
    })

    test('an idempotent job is redelivered with a higher attempt and runs again', async () => {
      const { job, p } = await killMidJob(true)
      await p.started(job.jobId)
      p.release(job.jobId)
      const r = await q!.queue.wait(job.jobId, WAIT)
      expect(r).toMatchObject({ status: 'completed', workerId: 'w2', attempt: 2 })
      expect(await q!.queue.counts()).toEqual({ waiting: 0, active: 0 })
    })
  },
)

describe('redis driver: the stalled sweep', () => {
  test("a dead consumer's popped but untaken job goes back to the waiting list", async () => {
    q = await redisUnderTest(TUNING)
    const keys = new RedisQueueKeys(keyspace(q.prefix as string).jobs('exec'))
    const job = makeJob('echo back')
    await q.queue.submit(job)
    // What a consumer that died between its blocking pop and its take script leaves behind.
    const redis = new Redis(REDIS_URL)
    try {
      expect(await redis.lmove(keys.wait, keys.pending('w-gone'), 'RIGHT', 'LEFT')).toBe(job.jobId)
      await redis.zadd(keys.workers, 1, 'w-gone')
    } finally {
      redis.disconnect()
    }
    const p = new ScriptedProcessor()
    await q.queue.consume(p.process, { workerId: 'w2' })
    expect(await q.queue.wait(job.jobId, WAIT)).toMatchObject({
      status: 'completed',
      attempt: 1,
      workerId: 'w2',
    })
  })

  test('a job whose lease lapsed more than maxStalledCount times ends interrupted, for a waiter elsewhere', async () => {
    q = await redisUnderTest({ ...TUNING, maxStalledCount: 0 })
    const prefix = q.prefix as string
    child = await WorkerChild.start(
      { scope: prefix, queuePrefix: prefix, sessionPrefix: prefix },
      'w-dead',
      { SBX_QUEUE_DRIVER: 'redis', SBX_LOCK_MS: '1000', SBX_STALLED_MS: '200' },
      CONSUMER_FIXTURE,
    )
    const job = makeJob('block', { idempotent: true })
    await q.queue.submit(job)
    await child.next((l) => l.event === 'start' && l.jobId === job.jobId)
    await child.kill()
    const other = await createRedisJobQueue({ redisUrl: REDIS_URL, prefix, queueName: 'exec' })
    try {
      const waiting = other.wait(job.jobId, WAIT)
      const p = new ScriptedProcessor()
      await q.queue.consume(p.process, { workerId: 'w2' })
      expect(await waiting).toMatchObject({ status: 'interrupted' })
      expect(p.calls).toEqual([])
    } finally {
      await other.close()
    }
  })
})

/*
 * handBackOn (the engine queue's "engine unreachable"): the processor's error hands the job back
 * instead of ending it failed; the next delivery runs with a higher attempt, and the fence decides.
 */
describe.each([
  ['bullmq', bullmqUnderTest],
  ['redis', redisUnderTest],
] as const satisfies ReadonlyArray<readonly [string, QueueFactory]>)(
  'handBackOn (%s)',
  (_driver, factory) => {
    test('an error handBackOn accepts hands the job back; the idempotent job runs again and completes', async () => {
      q = await factory(TUNING)
      class EngineAway extends Error {}
      const attempts: number[] = []
      const errors: string[] = []
      await q.queue.consume(
        async (job, ctx) => {
          attempts.push(ctx.attempt)
          const early = await ctx.fence.begin({ sandboxId: 'sb' })
          if (early.kind !== 'run') throw new Error(`fence said ${early.kind}`)
          if (ctx.attempt === 1) throw new EngineAway('engine unreachable')
          return {
            status: 'completed',
            attempt: ctx.attempt,
            workerId: ctx.workerId,
            result: {
              exitCode: 0,
              stdout: job.command,
              stderr: '',
              timedOut: false,
              truncated: false,
              durationMs: 1,
              sandboxId: 'sb',
            },
          }
        },
        {
          workerId: 'w1',
          handBackOn: (err) => err instanceof EngineAway,
          onError: (_err, context) => errors.push(context),
        },
      )
      const job = makeJob('again', { idempotent: true })
      await q.queue.submit(job)
      expect(await q.queue.wait(job.jobId, WAIT)).toMatchObject({ status: 'completed', attempt: 2 })
      expect(attempts).toEqual([1, 2])
      expect(errors.some((c) => c.includes('handing the job back'))).toBe(true)
    })
  },
)
