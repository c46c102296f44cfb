import { AppError } from '../errors.js'
import type { JobView } from './exec.js'
import type { ExecJobResult } from '../queue/schemas.js'
import type { JobInfo } from '../queue/types.js'

/** Maps a queue job to the API's view of it. */
export function jobView(info: JobInfo): JobView {
  const { job } = info
  const base: JobView = {
    id: job.jobId,
    state: info.state === 'waiting' ? 'queued' : 'running',
    provider: job.providerId,
    profile: job.profile,
    ...(job.sessionId ? { sessionId: job.sessionId } : {}),
    createdAt: job.submittedAt,
  }
  return info.result ? { ...base, ...finished(info.result) } : base
}

function finished(r: ExecJobResult): Partial<JobView> {
  switch (r.status) {
    case 'completed':
      return { state: 'completed', result: r.result }
    case 'failed':
      return { state: 'failed', error: { code: r.code, message: r.message } }
    case 'interrupted':
      return {
        state: 'interrupted',
        error: { code: 'JOB_INTERRUPTED', message: r.message },
        partialOutput: { stdout: r.stdout, stderr: r.stderr },
      }
    case 'cancelled':
      return { state: 'cancelled', error: { code: 'JOB_CANCELLED', message: r.reason } }
  }
}

/**
 * The view of an accepted job whose state could not be read (`err`: Redis away past the wait, a
 * store error). Never "not submitted": the job was accepted and may have run.
 */
export function unknownJobView(accepted: JobView, err: unknown): JobView {
  const code = err instanceof AppError ? err.code : 'INTERNAL'
  const why = err instanceof AppError ? err.message : 'an internal error; see the server log'
  return {
    ...withoutOutcome(accepted),
    state: 'unknown',
    error: {
      code,
      message:
        `Accepted as job ${accepted.id}; its result could not be read (${why}). The command may have run or ` +
        `may still run: GET /v1/jobs/${accepted.id} later, and do not submit it again without the same ` +
        'Idempotency-Key.',
    },
  }
}

/** The view of an accepted job that the queue no longer has (lost by Redis, or past retention). */
export function vanishedJobView(accepted: JobView): JobView {
  return {
    ...withoutOutcome(accepted),
    state: 'unknown',
    error: {
      code: 'NOT_FOUND',
      message:
        `Accepted as job ${accepted.id}, but the queue no longer has it: Redis lost it (writes not yet on disk ` +
        'when it crashed) or it is past retention. Its command may have run: check the sandbox before ' +
        'running it again.',
    },
  }
}

/** The 404 message for a job id the queue does not know for this tenant. */
export function noSuchJobMessage(id: string): string {
  return (
    `No job ${id} for this tenant: never submitted, past retention (1 h by default), or lost by Redis ` +
    '(writes not yet on disk when it crashed). If it was accepted, its command may have run.'
  )
}

function withoutOutcome(view: JobView): JobView {
  const { result: _r, error: _e, partialOutput: _p, ...rest } = view
  return rest
}
