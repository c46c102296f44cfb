import type { Redis } from 'ioredis'
import { AppError } from '../errors.js'
import type { QueueJob } from './schemas.js'
import type { AlongsideWrite, JobQueue, SubmitOrGetOutcome } from './types.js'

/**
 * The answer to a submission Redis was away for (its lookup or its add failed): the job was not
 * accepted, and a retry under the same id is safe. Other errors pass unchanged.
 */
export function notAccepted(err: unknown, jobId: string): unknown {
  if (!(err instanceof AppError) || err.code !== 'QUEUE_UNAVAILABLE') return err
  if (/not accepted/.test(err.message)) return err
  return new AppError(
    'QUEUE_UNAVAILABLE',
    `Redis is unreachable, so job ${jobId} was not accepted: submit it again once Redis is back ` +
      '(with the same Idempotency-Key, a repeat never runs it twice)',
    { retryable: true, cause: err },
  )
}

/**
 * Writes `alongside` by itself: its `HSETNX` on `redis` (the queue's connection, on the Redis the
 * record lives in) when it has one, else its own write. Never rejects: a record that failed is
 * written again by the session's next call.
 */
export async function writeAlongside(alongside: AlongsideWrite | undefined, redis?: Redis): Promise<void> {
  if (!alongside) return
  const { setIfAbsent: w } = alongside
  await (w && redis ? redis.hsetnx(w.key, w.field, w.value) : alongside.write()).catch(() => undefined)
}

/**
 * {@link JobQueue.submitOrGet} for a queue whose add cannot answer an existing job: the lookup
 * (beside `record`, the alongside write already under way), then the submit when the id is free.
 * Two submissions of one id racing each other may both answer `added`; the queue still holds one job.
 */
export async function lookUpThenSubmit<TJob extends QueueJob, TValue>(
  queue: Pick<JobQueue<TJob, TValue>, 'inspect' | 'submit'>,
  job: TJob,
  record: Promise<void>,
): Promise<SubmitOrGetOutcome<TJob, TValue>> {
  try {
    const [existing] = await Promise.all([queue.inspect(job.jobId), record])
    if (existing) return { kind: 'exists', info: existing }
    await queue.submit(job)
    return { kind: 'added' }
  } catch (err) {
    throw notAccepted(err, job.jobId)
  }
}
