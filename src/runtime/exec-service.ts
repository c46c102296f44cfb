import { AppError } from '../errors.js'
import type { ExecInput, ExecService, JobEvent, JobView } from '../http/deps.js'
import type { ExecJob, ExecJobResult } from '../queue/schemas.js'
import type { JobInfo, JobQueue } from '../queue/types.js'
import type { QueueRouteExecutor } from '../routing/queue-route-executor.js'
import { ensureSessionRecord } from './session-directory.js'
import type { SessionDirectory } from './session-directory.js'
import type { TenantJobLimiter } from './tenant-jobs.js'
import type { SessionPool } from '../sessions/types.js'
import { sessionKeyOf } from '../worker/exec-processor.js'

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
      return { state: 'interrupted', error: { code: 'JOB_INTERRUPTED', message: r.message } }
    case 'cancelled':
      return { state: 'cancelled', error: { code: 'JOB_CANCELLED', message: r.reason } }
  }
}

/** {@link ExecService} on the job queue: every lookup checks the job's tenant (another tenant's job is unknown). */
export class QueueExecService implements ExecService {
  constructor(
    private readonly queue: JobQueue,
    private readonly router: QueueRouteExecutor,
    private readonly directory: SessionDirectory,
    private readonly limiter?: TenantJobLimiter,
    /** Refuses (429 QUOTA_EXCEEDED) a job whose new sandbox would not fit, before it is queued. */
    private readonly bounds?: Pick<SessionPool, 'admit'>,
  ) {}

  async submit(tenant: string, input: ExecInput, opts: { callId: string }): Promise<JobView> {
    const job = this.router.buildJob({
      providerId: input.provider,
      profile: input.profile,
      command: input.command,
      callId: opts.callId,
      toolName: 'exec',
      tenant,
      ...(input.sessionId ? { sessionId: input.sessionId } : {}),
      ...(input.cwd ? { cwd: input.cwd } : {}),
      ...(input.env ? { env: input.env } : {}),
      ...(input.stdin !== undefined ? { stdin: input.stdin } : {}),
      ...(input.timeoutMs !== undefined ? { timeoutMs: input.timeoutMs } : {}),
      ...(input.idempotent !== undefined ? { idempotent: input.idempotent } : {}),
    })
    const existing = await this.queue.inspect(job.jobId)
    // A job already submitted (same Idempotency-Key) is answered as it is; a new one must fit.
    if (!existing) await this.bounds?.admit(sessionKeyOf(job))
    await ensureSessionRecord(this.directory, tenant, input.sessionId, {
      provider: input.provider,
      profile: input.profile,
    })
    if (existing && !sameRequest(existing.job, job)) {
      throw new AppError(
        'CONFLICT',
        `Idempotency-Key already used for a different request (job ${job.jobId}); use a new key for a new command`,
      )
    }
    if (!existing) {
      const release = this.limiter?.take(tenant)
      try {
        await this.queue.submit(job)
      } catch (err) {
        release?.()
        throw err
      }
      if (release) {
        // The slot is held until the job is over, whoever waits for it.
        this.queue
          .wait(job.jobId, { timeoutMs: job.timeoutMs + 15 * 60_000 })
          .catch(() => undefined)
          .finally(release)
      }
    }
    const info = await this.queue.inspect(job.jobId)
    if (info && info.job.tenant !== tenant)
      throw new AppError('CONFLICT', 'job id collision; retry with another key')
    return info
      ? jobView(info)
      : {
          id: job.jobId,
          state: 'queued',
          provider: job.providerId,
          profile: job.profile,
          createdAt: job.submittedAt,
        }
  }

  async get(tenant: string, id: string): Promise<JobView | undefined> {
    const info = await this.owned(tenant, id)
    return info ? jobView(info) : undefined
  }

  async wait(
    tenant: string,
    id: string,
    opts: { timeoutMs: number; signal?: AbortSignal },
  ): Promise<JobView | undefined> {
    const info = await this.owned(tenant, id)
    if (!info) return undefined
    if (info.result) return jobView(info)
    try {
      await this.queue.wait(id, {
        timeoutMs: opts.timeoutMs,
        ...(opts.signal ? { signal: opts.signal } : {}),
      })
    } catch (err) {
      // A wait that ran out is not a failure of the job: answer with where it is now.
      if (!(err instanceof AppError && err.code === 'QUEUE_UNAVAILABLE') && !opts.signal?.aborted) throw err
    }
    return this.get(tenant, id)
  }

  async cancel(tenant: string, id: string): Promise<JobView | undefined> {
    const info = await this.owned(tenant, id)
    if (!info) return undefined
    if (!info.result) await this.queue.cancel(id, 'cancelled over the API')
    return this.get(tenant, id)
  }

  async events(
    tenant: string,
    id: string,
    signal: AbortSignal,
  ): Promise<AsyncIterable<JobEvent> | undefined> {
    if (!(await this.owned(tenant, id))) return undefined
    const pending: JobEvent[] = []
    let wake: (() => void) | undefined
    let done = false
    const push = (e: JobEvent): void => {
      pending.push(e)
      wake?.()
    }
    const off = await this.queue.subscribeOutput(id, (c) => push({ type: c.stream, data: c.data }))
    const finish = async (): Promise<void> => {
      try {
        const view = await this.wait(tenant, id, { timeoutMs: 24 * 3600_000, signal })
        if (view) push({ type: 'result', job: view })
      } finally {
        done = true
        wake?.()
        await off()
      }
    }
    const finishing = finish()
    return {
      async *[Symbol.asyncIterator]() {
        while (true) {
          const next = pending.shift()
          if (next) {
            yield next
            if (next.type === 'result') break
            continue
          }
          if (done || signal.aborted) break
          await new Promise<void>((r) => (wake = r))
          wake = undefined
        }
        await finishing.catch(() => undefined)
      },
    }
  }

  private async owned(tenant: string, id: string): Promise<JobInfo | undefined> {
    const info = await this.queue.inspect(id)
    return info && info.job.tenant === tenant ? info : undefined
  }
}

/** Whether a resubmission asks for the same thing as the stored job (what the caller sent, not timestamps). */
function sameRequest(a: ExecJob, b: ExecJob): boolean {
  return (
    a.tenant === b.tenant &&
    a.command === b.command &&
    a.providerId === b.providerId &&
    a.profile === b.profile &&
    a.sessionId === b.sessionId &&
    a.cwd === b.cwd &&
    a.stdin === b.stdin &&
    JSON.stringify(a.env ?? {}) === JSON.stringify(b.env ?? {})
  )
}
