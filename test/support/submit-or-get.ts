import { Redis } from 'ioredis'
import { expect } from 'vitest'
import type { AlongsideWrite, JobQueue } from '../../src/queue/index.js'
import { makeJob } from './queue-drivers.js'
import { REDIS_URL } from './redis.js'

/**
 * The conformance of `queue.submitOrGet` (no consumer running): a new id answers `added`, the same id
 * again answers `exists` with the job as stored (not the resubmitted payload), and `alongside` is
 * written both times. With `prefix` (a queue on Redis) the record given as an `HSETNX` lands in
 * Redis without its own write; without Redis the queue calls the record's own write. A record given
 * without `setIfAbsent` is written by its own write on every queue.
 */
export async function expectSubmitOrGetConforms(queue: JobQueue, prefix: string | undefined): Promise<void> {
  const redis = prefix === undefined ? undefined : new Redis(REDIS_URL)
  try {
    for (const form of ['setIfAbsent', 'write'] as const) {
      const key = `${prefix ?? 'none'}:directory:acme`
      const field = `s-${form}`
      const writes: string[] = []
      const alongside: AlongsideWrite = {
        ...(form === 'setIfAbsent' ? { setIfAbsent: { key, field, value: '{"id":"s"}' } } : {}),
        write: () => {
          writes.push(field)
          return Promise.resolve()
        },
      }
      const inRedis = form === 'setIfAbsent' && redis !== undefined
      /** How many times the record was written since the last look (a Redis record is deleted to see the next). */
      const written = async (): Promise<number> => {
        if (!inRedis) return writes.splice(0).length
        expect(writes, 'the HSETNX rode with the submission: no write of its own').toEqual([])
        return redis.hdel(key, field)
      }
      const job = makeJob(`echo ${form}`, { sessionId: field })
      expect(await queue.submitOrGet(job, { alongside })).toEqual({ kind: 'added' })
      expect(await written()).toBe(1)
      const again = await queue.submitOrGet(
        { ...job, command: 'echo other', submittedAt: job.submittedAt + 1 },
        { alongside },
      )
      expect(again).toEqual({ kind: 'exists', info: { job, state: 'waiting' } })
      expect(await written()).toBe(1)
      expect(await queue.inspect(job.jobId)).toEqual({ job, state: 'waiting' })
    }
    expect((await queue.counts()).waiting).toBe(2)
  } finally {
    redis?.disconnect()
  }
}
