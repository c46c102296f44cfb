import { Redis } from 'ioredis'
import { afterEach, describe, expect, test } from 'vitest'
import { AppError } from '../../../src/errors.js'
import { deriveJobId, resultOfOutcome } from '../../../src/queue/index.js'
import type { JobProcessor, LoggedChunk } from '../../../src/queue/index.js'
import type { JobEvent } from '../../../src/services/index.js'
import { QueueExecService } from '../../../src/services/exec-service.js'
import { RedisSessionDirectory } from '../../../src/services/session-directory.js'
import { redisUnderTest } from '../../support/queue-drivers.js'
import type { QueueUnderTest } from '../../support/queue-drivers.js'
import { jobRouter } from '../../support/job-router.js'
import { completedResult } from '../../support/scripted-processor.js'
import { REDIS_URL } from '../../support/redis.js'

/*
 * The `redis` driver's lean path through the exec service: the idempotency lookup and the session's
 * record ride with the add script, and a job's last live chunk rides with its finish.
 */

let q: QueueUnderTest | undefined
let redis: Redis | undefined
afterEach(async () => {
  await q?.cleanup()
  q = undefined
  redis?.disconnect()
  redis = undefined
})

async function setup(): Promise<{
  service: QueueExecService
  directory: RedisSessionDirectory
  prefix: string
}> {
  q = await redisUnderTest()
  redis = new Redis(REDIS_URL)
  const prefix = q.prefix as string
  const directory = new RedisSessionDirectory(redis, `${prefix}:`)
  return { service: new QueueExecService(q.queue, jobRouter, directory), directory, prefix }
}

/** A processor that passes the fence, publishes `chunks` (waiting on `between` after each but the last) and completes. */
function publishing(chunks: string[], between?: (i: number) => Promise<void>): JobProcessor {
  return async (job, ctx) => {
    const early = resultOfOutcome(await ctx.fence.begin({ sandboxId: 'sb-test' }))
    if (early) return early
    for (const [i, data] of chunks.entries()) {
      ctx.publish({ stream: 'stdout', data })
      if (between && i < chunks.length - 1) await between(i)
    }
    return completedResult(ctx, chunks.join(''))
  }
}

const input = { provider: 'docker', profile: 'default', command: 'echo hi', sessionId: 's1' }

describe('idempotency answered by the add script (driver redis)', () => {
  test('the queue offers the folded add', async () => {
    await setup()
    expect(typeof q?.queue.submitOrGet).toBe('function')
  })

  test('a resubmitted Idempotency-Key returns its job; the session is recorded either way', async () => {
    const { service, directory } = await setup()
    const first = await service.submit('acme', input, { callId: 'key-1' })
    expect(first).toMatchObject({ state: 'queued', sessionId: 's1' })
    expect(await directory.get('acme', 's1')).toMatchObject({ id: 's1', provider: 'docker' })
    // The record was deleted meanwhile (DELETE /v1/sessions): the resubmission records it again.
    await directory.delete('acme', 's1')
    const again = await service.submit('acme', input, { callId: 'key-1' })
    expect(again.id).toBe(first.id)
    expect(again.state).toBe('queued')
    expect(await directory.get('acme', 's1')).toMatchObject({ id: 's1' })
    expect(await q?.queue.counts()).toEqual({ waiting: 1, active: 0 })
  })

  test('a different request under the same key is a 409 CONFLICT, and nothing is queued for it', async () => {
    const { service } = await setup()
    await service.submit('acme', input, { callId: 'key-2' })
    const err = await service
      .submit('acme', { ...input, command: 'rm -rf /tmp/x' }, { callId: 'key-2' })
      .catch((e: unknown) => e)
    expect(err).toBeInstanceOf(AppError)
    expect((err as AppError).code).toBe('CONFLICT')
    expect(await q?.queue.counts()).toEqual({ waiting: 1, active: 0 })
  })

  test('a resubmission of a finished job returns its result', async () => {
    const { service } = await setup()
    await q?.queue.consume(publishing(['hi\n']), { workerId: 'w1' })
    const first = await service.submit('acme', input, { callId: 'key-3' })
    const done = await service.wait('acme', first.id, { timeoutMs: 10_000 })
    expect(done).toMatchObject({ state: 'completed', result: { stdout: 'hi\n' } })
    const again = await service.submit('acme', input, { callId: 'key-3' })
    expect(again).toMatchObject({ id: first.id, state: 'completed', result: { stdout: 'hi\n' } })
  })

  test('the job index keys get their TTL once, not on every add', async () => {
    const { service, prefix } = await setup()
    // Ids ending in 0 trim the index (and refresh its TTL): pick call ids whose job ids do not.
    const calls = ['a', 'b', 'c', 'd', 'e', 'f', 'g', 'h'].filter(
      (c) => !deriveJobId('acme', c).endsWith('0'),
    )
    const [firstCall, secondCall] = calls as [string, string]
    await service.submit('acme', input, { callId: firstCall })
    const key = (await redis!.keys(`${prefix}:*index:t:acme`))[0] as string
    expect(key).toBeDefined()
    await redis!.pexpire(key, 500_000)
    await service.submit('acme', input, { callId: secondCall })
    const ttl = await redis!.pttl(key)
    expect(ttl).toBeGreaterThan(0)
    expect(ttl).toBeLessThanOrEqual(500_000)
    expect(await redis!.zcard(key)).toBe(2)
  })
})

describe("a job's last live chunk rides with its finish (driver redis)", () => {
  test('streaming readers get the chunk, then the result; GET of the output has it', async () => {
    const { service, prefix } = await setup()
    await q?.queue.consume(publishing(['hi\n']), { workerId: 'w1' })
    const job = await service.submit('acme', input, { callId: 'out-1' })
    const events = await service.events('acme', job.id, new AbortController().signal)
    if (!events) throw new Error('the job was not found')
    const got: JobEvent[] = []
    for await (const e of events) got.push(e)
    expect(got.map((e) => e.type)).toEqual(['stdout', 'result'])
    expect(got[0]).toMatchObject({ type: 'stdout', data: 'hi\n', id: 3 })
    expect(got[1]).toMatchObject({ type: 'result', job: { state: 'completed' } })
    expect(await q!.queue.readOutput(job.id)).toEqual([{ stream: 'stdout', data: 'hi\n', offset: 3 }])
    // It came with the finish: the stream's tail (kept for a redelivery's interrupted report) was
    // not written, as no redelivery of a finished job reads it.
    expect(await redis!.keys(`${prefix}:*{${job.id}}:out`)).toEqual([])
    expect(
      await redis!.pttl((await redis!.keys(`${prefix}:*{${job.id}}:log`))[0] as string),
    ).toBeLessThanOrEqual(60_000)
  })

  test("a long command's output still streams chunk by chunk, before the job ends", async () => {
    const { service } = await setup()
    const seen: LoggedChunk[] = []
    const arrived: Array<() => void> = []
    const chunk = (n: number): Promise<void> =>
      new Promise((resolve) => {
        if (seen.length > n) resolve()
        else arrived[n] = resolve
      })
    // The processor goes on only once a reader saw its chunk live: nothing waits for the finish.
    await q?.queue.consume(
      publishing(['one\n', 'two\n', 'three\n'], (i) => chunk(i)),
      { workerId: 'w1' },
    )
    const jobId = deriveJobId('acme', 'out-2')
    const off = await q!.queue.subscribeOutput(jobId, (c) => {
      seen.push(c)
      arrived[seen.length - 1]?.()
    })
    await service.submit('acme', input, { callId: 'out-2' })
    const done = await service.wait('acme', jobId, { timeoutMs: 10_000 })
    await off()
    expect(done).toMatchObject({ state: 'completed' })
    expect(seen).toEqual([
      { stream: 'stdout', data: 'one\n', offset: 4 },
      { stream: 'stdout', data: 'two\n', offset: 8 },
      { stream: 'stdout', data: 'three\n', offset: 14 },
    ])
    expect(await q!.queue.readOutput(jobId)).toEqual(seen)
  })
})
