import { afterEach, describe, expect, test } from 'vitest'
import { AppError } from '../../../src/errors.js'
import { createBullmqJobQueue } from '../../../src/queue/index.js'
import type { Consumer, OutputChunk } from '../../../src/queue/index.js'
import { DRIVERS, makeJob } from '../../support/queue-drivers.js'
import type { QueueUnderTest } from '../../support/queue-drivers.js'
import { ScriptedProcessor } from '../../support/scripted-processor.js'
import { expectSubmitOrGetConforms } from '../../support/submit-or-get.js'

const WAIT = { timeoutMs: 15_000 }

describe.each(DRIVERS)('JobQueue driver: %s', (_name, factory) => {
  let q: QueueUnderTest | undefined
  afterEach(async () => {
    await q?.cleanup()
    q = undefined
  })

  async function setup(
    concurrency = 4,
  ): Promise<{ q: QueueUnderTest; p: ScriptedProcessor; consumer: Consumer }> {
    q = await factory()
    const p = new ScriptedProcessor()
    const consumer = await q.queue.consume(p.process, { concurrency, workerId: 'w1' })
    return { q, p, consumer }
  }

  test('submit → completed result, with live output', async () => {
    const { q } = await setup()
    const job = makeJob('echo hi')
    const chunks: OutputChunk[] = []
    const off = await q.queue.subscribeOutput(job.jobId, (c) => chunks.push(c))
    await q.queue.submit(job)
    const r = await q.queue.wait(job.jobId, WAIT)
    await off()
    expect(r).toMatchObject({
      status: 'completed',
      attempt: 1,
      workerId: 'w1',
      result: { stdout: 'hi\n', exitCode: 0 },
    })
    expect(chunks).toEqual([{ stream: 'stdout', data: 'started\n', offset: 8 }])
    // Numbered and retained for readers resuming or reattaching (GET /v1/jobs/:id/events).
    expect(await q.queue.readOutput(job.jobId)).toEqual(chunks)
    expect(await q.queue.getResult(job.jobId)).toEqual(r)
  })

  test('the same job id returns the same job and result, while running and after completion', async () => {
    const { q, p } = await setup()
    const job = makeJob('block')
    await q.queue.submit(job)
    await p.started(job.jobId)
    await q.queue.submit({ ...job, command: 'echo other' })
    p.release(job.jobId)
    const first = await q.queue.wait(job.jobId, WAIT)
    await q.queue.submit({ ...job, command: 'echo other' })
    const second = await q.queue.wait(job.jobId, WAIT)
    expect(second).toEqual(first)
    expect(p.calls).toEqual([job.jobId])
    // Another process's handle sees the same result.
    const other = await q.reopen()
    expect(await other.wait(job.jobId, WAIT)).toEqual(first)
  })

  test('submitOrGet answers added, then exists with the stored job; alongside is written both times', async () => {
    q = await factory()
    await expectSubmitOrGetConforms(q.queue, q.prefix)
  })

  test('inspect and counts follow a job through its states', async () => {
    const { q, p } = await setup()
    const job = makeJob('block')
    await q.queue.submit(job)
    await p.started(job.jobId)
    expect(await q.queue.inspect(job.jobId)).toMatchObject({ state: 'active', job: { jobId: job.jobId } })
    expect(await q.queue.counts()).toEqual({ waiting: 0, active: 1 })
    p.release(job.jobId)
    const r = await q.queue.wait(job.jobId, WAIT)
    expect(await q.queue.inspect(job.jobId)).toEqual({ job, state: 'finished', result: r })
    expect(await q.queue.inspect(makeJob('x').jobId)).toBeUndefined()
  })

  test("list: a tenant's jobs newest first, by session, never another tenant's", async () => {
    const { q } = await setup()
    const t0 = Date.now()
    const a1 = makeJob('echo a1', { sessionId: 's1', submittedAt: t0 })
    const a2 = makeJob('echo a2', { submittedAt: t0 + 1 })
    const a3 = makeJob('echo a3', { sessionId: 's1', submittedAt: t0 + 2 })
    const b1 = makeJob('echo b1', { tenant: 'globex', sessionId: 's1', submittedAt: t0 + 3 })
    for (const job of [a1, a2, a3, b1]) await q.queue.submit(job)
    await Promise.all([a1, a2, a3, b1].map((j) => q.queue.wait(j.jobId, WAIT)))
    const ids = async (tenant: string, opts: { sessionId?: string; limit: number }) =>
      (await q.queue.list(tenant, opts)).map((i) => i.job.jobId)
    expect(await ids('acme', { limit: 10 })).toEqual([a3.jobId, a2.jobId, a1.jobId])
    expect(await ids('acme', { limit: 2 })).toEqual([a3.jobId, a2.jobId])
    expect(await ids('acme', { sessionId: 's1', limit: 10 })).toEqual([a3.jobId, a1.jobId])
    expect(await ids('globex', { limit: 10 })).toEqual([b1.jobId])
    expect(await ids('initech', { limit: 10 })).toEqual([])
    const [newest] = await q.queue.list('acme', { limit: 1 })
    expect(newest).toMatchObject({ state: 'finished', result: { status: 'completed' } })
  })

  test('processor errors map to failed results with stable codes', async () => {
    const { q } = await setup()
    const app = makeJob('fail-app')
    const plain = makeJob('fail')
    await Promise.all([q.queue.submit(app), q.queue.submit(plain)])
    expect(await q.queue.wait(app.jobId, WAIT)).toMatchObject({
      status: 'failed',
      code: 'SANDBOX_LOST',
      retryable: false,
    })
    expect(await q.queue.wait(plain.jobId, WAIT)).toMatchObject({
      status: 'failed',
      code: 'INTERNAL',
      message: expect.stringContaining('boom') as unknown,
    })
  })

  test('cancel reaches a running job and aborts its processor', async () => {
    const { q, p } = await setup()
    const job = makeJob('block')
    await q.queue.submit(job)
    await p.started(job.jobId)
    await q.queue.cancel(job.jobId, 'user pressed stop')
    expect(await q.queue.wait(job.jobId, WAIT)).toEqual({ status: 'cancelled', reason: 'user pressed stop' })
  })

  test('a job cancelled before any worker took it never runs', async () => {
    q = await factory()
    const job = makeJob('echo never')
    await q.queue.submit(job)
    await q.queue.cancel(job.jobId, 'changed my mind')
    const p = new ScriptedProcessor()
    await q.queue.consume(p.process, { concurrency: 1 })
    expect(await q.queue.wait(job.jobId, WAIT)).toEqual({ status: 'cancelled', reason: 'changed my mind' })
    expect(p.runs).toEqual([])
  })

  test('concurrency bounds the jobs running at once', async () => {
    const { q, p } = await setup(2)
    const jobs = [1, 2, 3, 4].map(() => makeJob('block'))
    for (const j of jobs) await q.queue.submit(j)
    await p.runningAtLeast(2)
    for (const j of jobs) {
      await p.started(j.jobId)
      p.release(j.jobId)
    }
    const results = await Promise.all(jobs.map((j) => q.queue.wait(j.jobId, WAIT)))
    expect(results.every((r) => r.status === 'completed')).toBe(true)
    expect(p.maxRunning).toBe(2)
  })

  test('shutdown hands a running job back; a non-idempotent redelivery reports interrupted with its output', async () => {
    const { q, p, consumer } = await setup()
    const job = makeJob('block')
    await q.queue.submit(job)
    await p.started(job.jobId)
    await consumer.close({ deadlineMs: 0 })
    const p2 = new ScriptedProcessor()
    await q.queue.consume(p2.process, { workerId: 'w2' })
    const r = await q.queue.wait(job.jobId, WAIT)
    expect(r).toMatchObject({
      status: 'interrupted',
      previous: { attempt: 1, workerId: 'w1', sandboxId: 'sb-test' },
    })
    expect(r.status === 'interrupted' && r.stdout).toBe('started\n')
    expect(p2.runs).toEqual([])
  })

  test('shutdown hands an idempotent job back; it runs again and completes once', async () => {
    const { q, p, consumer } = await setup()
    const job = makeJob('block', { idempotent: true })
    await q.queue.submit(job)
    await p.started(job.jobId)
    const closing = consumer.close({ deadlineMs: 0 })
    const p2 = new ScriptedProcessor()
    await q.queue.consume(p2.process, { workerId: 'w2' })
    await closing
    await p2.started(job.jobId)
    p2.release(job.jobId)
    const r = await q.queue.wait(job.jobId, WAIT)
    expect(r).toMatchObject({ status: 'completed', workerId: 'w2' })
    expect(r.status === 'completed' && r.attempt).toBeGreaterThan(1)
    expect(p.runs.length + p2.runs.length).toBe(2)
  })

  test('graceful close lets running jobs finish within the deadline', async () => {
    const { q, p, consumer } = await setup()
    const job = makeJob('block')
    await q.queue.submit(job)
    await p.started(job.jobId)
    const closing = consumer.close({ deadlineMs: 10_000 })
    p.release(job.jobId)
    await closing
    expect(await q.queue.wait(job.jobId, WAIT)).toMatchObject({ status: 'completed', workerId: 'w1' })
  })

  test('waiting past the timeout fails with QUEUE_UNAVAILABLE; unknown jobs with NOT_FOUND', async () => {
    q = await factory()
    const job = makeJob('echo nobody')
    await q.queue.submit(job)
    const err = await q.queue.wait(job.jobId, { timeoutMs: 50 }).catch((e: unknown) => e)
    expect(err).toBeInstanceOf(AppError)
    expect((err as AppError).code).toBe('QUEUE_UNAVAILABLE')
    const missing = await q.queue.wait(makeJob('x').jobId, WAIT).catch((e: unknown) => e)
    expect((missing as AppError).code).toBe('NOT_FOUND')
  })
})

describe('BullMQ driver without Redis', () => {
  test('fails fast with QUEUE_UNAVAILABLE naming the fix', async () => {
    const t = performance.now()
    const err = await createBullmqJobQueue({
      redisUrl: 'redis://127.0.0.1:1',
      connectTimeoutMs: 2_000,
    }).catch((e: unknown) => e)
    expect(err).toBeInstanceOf(AppError)
    expect((err as AppError).code).toBe('QUEUE_UNAVAILABLE')
    expect((err as AppError).message).toMatch(/REDIS_URL/)
    expect(performance.now() - t).toBeLessThan(3_000)
  })
})
