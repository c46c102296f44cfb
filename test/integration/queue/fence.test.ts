import { randomUUID } from 'node:crypto'
import { Redis } from 'ioredis'
import { afterAll, describe, expect, test } from 'vitest'
import { FenceKeys, RedisFenceStore } from '../../../src/queue/redis-common/redis-fence.js'
import {
  createMemoryFenceStore,
  decideFence,
  interruptedResult,
  resultOfOutcome,
} from '../../../src/queue/index.js'
import type { ExecJob, ExecJobResult, JobFence } from '../../../src/queue/index.js'
import { makeJob } from '../../support/queue-drivers.js'
import { deleteKeys, REDIS_URL } from '../../support/redis.js'

const done: ExecJobResult = { status: 'cancelled', reason: 'earlier' }
const prev = { attempt: 1, workerId: 'w1', startedAt: 0, sandboxId: 'sb' }

describe('decideFence', () => {
  test('a stored result wins, then a cancel, then an earlier start (non-idempotent only)', () => {
    const base = { stdout: 'o', stderr: 'e' }
    expect(decideFence({ ...base, done, cancel: 'x', fence: prev }, false)).toEqual({
      kind: 'done',
      result: done,
    })
    expect(decideFence({ ...base, cancel: 'x', fence: prev }, true)).toEqual({
      kind: 'cancelled',
      reason: 'x',
    })
    expect(decideFence({ ...base, fence: prev }, false)).toEqual({
      kind: 'fenced',
      previous: prev,
      stdout: 'o',
      stderr: 'e',
    })
    expect(decideFence({ ...base, fence: prev }, true)).toEqual({ kind: 'run', previous: prev })
    expect(decideFence(base, false)).toEqual({ kind: 'run' })
  })

  test('a fenced outcome becomes an interrupted result carrying what is known', () => {
    const r = resultOfOutcome({ kind: 'fenced', previous: prev, stdout: 'partial', stderr: '' })
    expect(r).toMatchObject({ status: 'interrupted', previous: prev, stdout: 'partial' })
    expect(r?.status === 'interrupted' && r.message).toContain('worker w1')
    expect(interruptedResult({ cause: 'job stalled more than allowable limit' })).toMatchObject({
      status: 'interrupted',
      message: expect.stringContaining('stalled') as unknown,
    })
    expect(resultOfOutcome({ kind: 'run' })).toBeUndefined()
  })
})

type FenceFactory = (job: ExecJob, attempt: number, workerId: string) => JobFence<unknown>
interface StoreUnderTest {
  fence: FenceFactory
  cancel(jobId: string, reason: string): Promise<void>
  tail(jobId: string, data: string): Promise<void>
}

const redis = new Redis(REDIS_URL)
const prefixes: string[] = []
afterAll(async () => {
  for (const p of prefixes) await deleteKeys(`${p}*`)
  redis.disconnect()
})

const STORES: ReadonlyArray<readonly [string, () => StoreUnderTest]> = [
  [
    'memory',
    () => {
      const s = createMemoryFenceStore({ retentionMs: 60_000, tailCapBytes: 8 })
      return {
        fence: (j, a, w) => s.fence(j, a, w),
        cancel: (id, r) => Promise.resolve(s.requestCancel(id, r)),
        tail: (id, data) => Promise.resolve(s.appendTail(id, { stream: 'stdout', data })),
      }
    },
  ],
  [
    'redis',
    () => {
      const base = `sbxtest-fence-${randomUUID().slice(0, 8)}`
      prefixes.push(base)
      const s = new RedisFenceStore(redis, new FenceKeys(base), {
        retentionMs: 60_000,
        tailCapBytes: 8,
        logCapBytes: 1024,
      })
      return {
        fence: (j, a, w) => s.fence(j, a, w),
        cancel: (id, r) => s.requestCancel(id, r),
        tail: async (id, data) => {
          s.publishChunk(id, { stream: 'stdout', data })
          await redis.ping() // same connection: the chunk script ran before the PING answers
        },
      }
    },
  ],
]

describe.each(STORES)('fence store: %s', (_name, make) => {
  const completed = (w: string): ExecJobResult => ({
    status: 'completed',
    attempt: 1,
    workerId: w,
    result: {
      exitCode: 0,
      stdout: w,
      stderr: '',
      timedOut: false,
      truncated: false,
      durationMs: 1,
      sandboxId: 'sb',
    },
  })

  test('a redelivered non-idempotent job is fenced, with the first attempt and its output tail', async () => {
    const s = make()
    const job = makeJob('x')
    expect(await s.fence(job, 1, 'w1').begin({ sandboxId: 'sb' })).toEqual({ kind: 'run' })
    await s.tail(job.jobId, 'hello ')
    await s.tail(job.jobId, 'world, more than the cap')
    const second = s.fence(job, 2, 'w2')
    const inspected = await second.inspect()
    expect(inspected).toMatchObject({
      kind: 'fenced',
      previous: { attempt: 1, workerId: 'w1', sandboxId: 'sb' },
    })
    expect(inspected.kind === 'fenced' && inspected.stdout.startsWith('hello ')).toBe(true)
    expect(await second.begin({})).toMatchObject({ kind: 'fenced' })
  })

  test('an idempotent job runs again; the first finisher wins', async () => {
    const s = make()
    const job = makeJob('x', { idempotent: true })
    await s.fence(job, 1, 'w1').begin({})
    const second = s.fence(job, 2, 'w2')
    expect(await second.begin({})).toMatchObject({ kind: 'run', previous: { workerId: 'w1' } })
    expect(await second.finish(completed('w2'))).toEqual(completed('w2'))
    expect(await s.fence(job, 1, 'w1').finish(completed('w1'))).toEqual(completed('w2'))
    expect(await s.fence(job, 3, 'w3').begin({})).toEqual({ kind: 'done', result: completed('w2') })
  })

  test('a cancel request stops a later begin, but not a finished job', async () => {
    const s = make()
    const job = makeJob('x')
    await s.cancel(job.jobId, 'stop')
    expect(await s.fence(job, 1, 'w1').begin({})).toEqual({ kind: 'cancelled', reason: 'stop' })
    const other = makeJob('y')
    await s.fence(other, 1, 'w1').finish(completed('w1'))
    await s.cancel(other.jobId, 'too late')
    expect(await s.fence(other, 2, 'w2').inspect()).toEqual({ kind: 'done', result: completed('w1') })
  })

  test('inspect never writes a fence', async () => {
    const s = make()
    const job = makeJob('x')
    expect(await s.fence(job, 1, 'w1').inspect()).toEqual({ kind: 'run' })
    expect(await s.fence(job, 1, 'w1').begin({})).toEqual({ kind: 'run' })
  })
})
