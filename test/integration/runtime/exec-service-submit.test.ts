import { randomUUID } from 'node:crypto'
import { Redis } from 'ioredis'
import { afterEach, describe, expect, test, vi } from 'vitest'
import { AppError } from '../../../src/errors.js'
import { resultOfOutcome } from '../../../src/queue/index.js'
import type { JobProcessor } from '../../../src/queue/index.js'
import { QueueExecService } from '../../../src/services/exec-service.js'
import { RedisSessionDirectory } from '../../../src/services/session-directory.js'
import { TenantJobLimiter } from '../../../src/services/tenant-jobs.js'
import { DRIVERS } from '../../support/queue-drivers.js'
import type { QueueUnderTest } from '../../support/queue-drivers.js'
import { deleteKeys, REDIS_URL } from '../../support/redis.js'
import { jobRouter } from '../../support/job-router.js'
import { completedResult } from '../../support/scripted-processor.js'

/*
 * One submit path through the exec service on every driver (`JobQueue.submitOrGet`): the `redis`
 * driver answers the idempotency lookup in its add script, the others look the job up first; the
 * answers are the same.
 */

let q: QueueUnderTest | undefined
let redis: Redis | undefined
let prefix: string | undefined
afterEach(async () => {
  await q?.cleanup()
  q = undefined
  if (prefix) await deleteKeys(`${prefix}:*`)
  prefix = undefined
  redis?.disconnect()
  redis = undefined
})

const input = { provider: 'docker', profile: 'default', command: 'echo hi', sessionId: 's1' }

/** Passes the fence and completes with `hi`. */
const completing: JobProcessor = async (_job, ctx) => {
  const early = resultOfOutcome(await ctx.fence.begin({ sandboxId: 'sb-test' }))
  return early ?? completedResult(ctx, 'hi\n')
}

describe.each(DRIVERS)('QueueExecService.submit on driver %s', (_name, factory) => {
  /** The service on the driver's queue, its sessions in Redis (a fleet's directory). */
  async function setup(gates: { limiter?: TenantJobLimiter; full?: () => boolean } = {}) {
    q = await factory()
    redis = new Redis(REDIS_URL)
    prefix = q.prefix ?? `sbxtest-${randomUUID().slice(0, 8)}`
    const directory = new RedisSessionDirectory(redis, `${prefix}:`)
    const bounds = {
      admit: (): Promise<void> =>
        gates.full?.()
          ? Promise.reject(new AppError('QUOTA_EXCEEDED', 'no room for a new sandbox'))
          : Promise.resolve(),
    }
    const service = new QueueExecService(q.queue, jobRouter, directory, gates.limiter, bounds)
    return { service, directory, queue: q.queue }
  }

  test('a resubmitted Idempotency-Key returns its job, a different request is a 409; the session is recorded either way', async () => {
    const { service, directory, queue } = await setup()
    const first = await service.submit('acme', input, { callId: 'key-1' })
    expect(first).toMatchObject({ state: 'queued', sessionId: 's1' })
    expect(await directory.get('acme', 's1')).toMatchObject({ id: 's1', provider: 'docker' })
    // The record was deleted meanwhile (DELETE /v1/sessions): the resubmission records it again.
    await directory.delete('acme', 's1')
    const again = await service.submit('acme', input, { callId: 'key-1' })
    expect(again).toMatchObject({ id: first.id, state: 'queued' })
    expect(await directory.get('acme', 's1')).toMatchObject({ id: 's1' })
    const err = await service
      .submit('acme', { ...input, command: 'echo other' }, { callId: 'key-1' })
      .catch((e: unknown) => e)
    expect((err as AppError).code).toBe('CONFLICT')
    expect(await queue.counts()).toEqual({ waiting: 1, active: 0 })
    await queue.consume(completing, { workerId: 'w1' })
    expect(await service.wait('acme', first.id, { timeoutMs: 10_000 })).toMatchObject({ state: 'completed' })
    expect(await service.submit('acme', input, { callId: 'key-1' })).toMatchObject({
      id: first.id,
      state: 'completed',
      result: { stdout: 'hi\n' },
    })
  })

  test('a resubmission is answered whatever the bounds and job slots say now; its slot is released once', async () => {
    const limiter = new TenantJobLimiter(1)
    let full = false
    const { service, directory, queue } = await setup({ limiter, full: () => full })
    // The jobs the tenant holds: counted by the queue's add for the fleet (`redis`), else by the limiter.
    const slotsKey = `${q?.prefix}:tenant-jobs:acme`
    const held = async (): Promise<number> =>
      queue.countsTenantJobs ? (redis?.zcard(slotsKey) ?? 0) : limiter.count('acme')
    const first = await service.submit('acme', input, { callId: 'slot-1' })
    expect(await held()).toBe(1)
    // The tenant's one job slot is taken: the resubmission is answered (and takes no slot), a new job is refused.
    expect(await service.submit('acme', input, { callId: 'slot-1' })).toMatchObject({ id: first.id })
    expect(await held()).toBe(1)
    const slots = await service.submit('acme', input, { callId: 'slot-2' }).catch((e: unknown) => e)
    expect((slots as AppError).code).toBe('QUOTA_EXCEEDED')
    expect((slots as AppError).message).toContain('1 jobs queued or running (quota 1)')
    // No room for a new sandbox: the same, and the resubmission still records its session.
    full = true
    await directory.delete('acme', 's1')
    expect(await service.submit('acme', input, { callId: 'slot-1' })).toMatchObject({ id: first.id })
    expect(await directory.get('acme', 's1')).toMatchObject({ id: 's1' })
    const bounds = await service.submit('acme', input, { callId: 'slot-3' }).catch((e: unknown) => e)
    expect(bounds).toMatchObject({ code: 'QUOTA_EXCEEDED', message: 'no room for a new sandbox' })
    expect(await queue.counts()).toEqual({ waiting: 1, active: 0 })
    // The job's end gives its slot back, once: the next new job fits.
    full = false
    await queue.consume(completing, { workerId: 'w1' })
    await service.wait('acme', first.id, { timeoutMs: 10_000 })
    if (!queue.countsTenantJobs) await vi.waitFor(() => expect(limiter.count('acme')).toBe(0))
    await service.submit('acme', input, { callId: 'slot-4' })
    expect(await held()).toBe(1)
    // Counted by the queue, the limiter of this process holds nothing.
    if (queue.countsTenantJobs) expect(limiter.count('acme')).toBe(0)
  })
})
