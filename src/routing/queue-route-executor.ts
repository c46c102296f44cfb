import { createHash } from 'node:crypto'
import { AppError } from '../errors.js'
import { deriveJobId } from '../queue/job-id.js'
import { abortReasonOf } from '../queue/run-job.js'
import type { ExecJob, ExecJobResult, OutputChunk } from '../queue/schemas.js'
import type { JobQueue } from '../queue/types.js'
import type { ExecResult, ShellMode } from '../sandbox/types.js'
import {
  JobNotAcceptedError,
  JobOutcomeUnknownError,
  jobCancelledError,
  unwrapJobResult,
} from './job-errors.js'
import { assertTenantMayRoute } from './policies.js'
import type { TenantRouteAllowList } from './policies.js'
import type { ProfileResolver } from '../sandbox/resolver.js'
import type { RouteContext, RouteExecutor, RouteRequest } from './types.js'

/** Options of {@link QueueRouteExecutor}. */
export interface QueueRouteExecutorOptions {
  queue: JobQueue
  /** Resolves providerId/profile (the `ProviderRegistry`). */
  targets: ProfileResolver
  /** Tenant of routes that name none (embedded mode). @default 'default' */
  defaultTenant?: string
  /**
   * Time allowed on top of the command's timeout for queueing, sandbox acquire (a cold create) and
   * the round trip, before the call fails with QUEUE_UNAVAILABLE (ms). @default 30000
   */
  waitMarginMs?: number
  /** After cancelling, wait this long for the worker to confirm the process was killed (ms). @default 5000 */
  cancelGraceMs?: number
  /** Per tenant, the providers and policies its routes may name (config `routing.tenants`). @default {} */
  tenantRoutes?: TenantRouteAllowList
}

/**
 * The queue-backed {@link RouteExecutor}: validates the target up front, builds the job (id from
 * tenant + callId, timeout clamped to the profile), submits it, streams its live output, propagates
 * the caller's abort as a job cancel, and returns the ExecResult or throws the AppError the job's
 * outcome stands for (JOB_INTERRUPTED, JOB_CANCELLED, SANDBOX_LOST, ACQUIRE_TIMEOUT, ...).
 */
export class QueueRouteExecutor implements RouteExecutor {
  private readonly defaultTenant: string
  private readonly waitMarginMs: number
  private readonly cancelGraceMs: number

  constructor(private readonly options: QueueRouteExecutorOptions) {
    this.defaultTenant = options.defaultTenant ?? 'default'
    this.waitMarginMs = options.waitMarginMs ?? 30_000
    this.cancelGraceMs = options.cancelGraceMs ?? 5_000
  }

  /** The timeout a route runs with: its own (or the profile default), clamped to the profile max. */
  effectiveTimeoutMs(route: RouteRequest): number {
    const { profile } = this.options.targets.resolve(route.providerId, route.profile)
    if (route.timeoutMs !== undefined && !(Number.isInteger(route.timeoutMs) && route.timeoutMs > 0)) {
      throw new AppError('BAD_REQUEST', `timeoutMs must be a positive integer (ms), got ${route.timeoutMs}.`)
    }
    return Math.min(route.timeoutMs ?? profile.defaultTimeoutMs, profile.maxTimeoutMs)
  }

  /**
   * The job a route becomes (exposed for the HTTP layer, which submits without waiting). Its id is
   * `jobId`, else derived from (tenant, callId).
   */
  buildJob(route: RouteRequest, jobId?: string): ExecJob {
    const tenant = route.tenant ?? this.defaultTenant
    assertTenantMayRoute(this.options.tenantRoutes ?? {}, tenant, route.providerId)
    const { profile } = this.options.targets.resolve(route.providerId, route.profile)
    return {
      jobId: jobId ?? deriveJobId(tenant, route.callId),
      tenant,
      ...(route.sessionId === undefined ? {} : { sessionId: route.sessionId }),
      providerId: route.providerId,
      profile: route.profile,
      command: route.command,
      ...(route.code === undefined ? {} : { code: { language: route.code.language } }),
      ...(route.cwd === undefined ? {} : { cwd: route.cwd }),
      ...(route.env === undefined ? {} : { env: { ...route.env } }),
      ...(route.stdin === undefined ? {} : { stdin: route.stdin }),
      timeoutMs: this.effectiveTimeoutMs(route),
      outputCapBytes: profile.outputCapBytes,
      idempotent: route.idempotent ?? false,
      // A cell runs in the kernel, never in a shell: a code job carries no shell fields.
      ...(route.code === undefined ? shellOf(route, profile.shell) : {}),
      callId: route.callId,
      toolName: route.toolName,
      submittedAt: Date.now(),
    }
  }

  /**
   * The job id {@link execute} uses: (tenant, callId) plus a fingerprint of what runs (target,
   * session, command, cwd, env, stdin, idempotency). Resubmitting a call returns the same job and
   * result; a callId reused for a *different* command — models served by some OpenAI-compatible
   * servers number their calls `call_0`, `call_1`… afresh every turn — runs the new command instead of
   * silently returning the old result.
   */
  jobIdOf(route: RouteRequest): string {
    const tenant = route.tenant ?? this.defaultTenant
    const fingerprint = createHash('sha256')
      .update(
        JSON.stringify([
          route.providerId,
          route.profile,
          route.sessionId ?? null,
          route.command,
          route.cwd ?? null,
          route.env ? Object.entries(route.env).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)) : null,
          route.stdin ?? null,
          route.idempotent ?? false,
          route.shell ?? null,
          route.shellDefault ?? null,
          // Appended only for cells, so the ids of shell routes stay what they were.
          ...(route.code ? [`code:${route.code.language}`] : []),
        ]),
      )
      .digest('hex')
      .slice(0, 16)
    return deriveJobId(tenant, `${route.callId}\0${fingerprint}`)
  }

  async execute(route: RouteRequest, ctx: RouteContext = {}): Promise<ExecResult> {
    const job = this.buildJob(route, this.jobIdOf(route))
    if (ctx.signal?.aborted) throw jobCancelledError(reasonText(ctx.signal))
    const { queue } = this.options
    const emitted = { stdout: 0, stderr: 0 }
    let finished = false
    const deliver = (c: OutputChunk): void => {
      if (finished) return
      emitted[c.stream] += c.data.length
      try {
        if (c.stream === 'stdout') ctx.onStdout?.(c.data)
        else ctx.onStderr?.(c.data)
      } catch {
        // A failing output callback must not fail the command; the result carries the whole output.
      }
    }
    // Subscribe before submitting, so no chunk is published before anyone listens.
    const off = ctx.onStdout || ctx.onStderr ? await queue.subscribeOutput(job.jobId, deliver) : undefined
    try {
      try {
        await queue.submit(job)
      } catch (err) {
        if (err instanceof AppError && err.code === 'QUEUE_UNAVAILABLE')
          throw new JobNotAcceptedError(job.jobId, err)
        throw err
      }
      try {
        ctx.onAccepted?.(job.jobId)
      } catch {
        // The caller's bookkeeping must not fail the command.
      }
      const outcome = await this.awaitResult(job.jobId, job.timeoutMs + this.waitMarginMs, ctx.signal)
      const result = unwrapJobResult(outcome)
      // Live output is best effort (pub/sub); top the stream up from the final result.
      if (result.stdout.length > emitted.stdout)
        deliver({ stream: 'stdout', data: result.stdout.slice(emitted.stdout) })
      if (result.stderr.length > emitted.stderr)
        deliver({ stream: 'stderr', data: result.stderr.slice(emitted.stderr) })
      return result
    } finally {
      finished = true
      await off?.()
    }
  }

  private async awaitResult(jobId: string, timeoutMs: number, signal?: AbortSignal): Promise<ExecJobResult> {
    const { queue } = this.options
    const stopWaiting = new AbortController()
    let grace: NodeJS.Timeout | undefined
    const onAbort = (): void => {
      queue.cancel(jobId, reasonText(signal)).catch(() => undefined)
      // Give the worker a moment to kill the process and confirm, so the caller returns after the kill.
      grace = setTimeout(() => stopWaiting.abort(), this.cancelGraceMs)
    }
    signal?.addEventListener('abort', onAbort, { once: true })
    try {
      const r = await queue.wait(jobId, { timeoutMs, signal: stopWaiting.signal })
      if (signal?.aborted) throw jobCancelledError(reasonText(signal))
      return r
    } catch (err) {
      if (signal?.aborted) throw jobCancelledError(reasonText(signal))
      if (err instanceof AppError && err.code === 'QUEUE_UNAVAILABLE') {
        // Nobody waits for it any more: make sure it does not run later.
        queue.cancel(jobId, 'the caller stopped waiting').catch(() => undefined)
        throw new JobOutcomeUnknownError(jobId, err)
      }
      throw err
    } finally {
      clearTimeout(grace)
      signal?.removeEventListener('abort', onAbort)
    }
  }
}

/** The job's shell fields: the call's, else the profile's; the surface default only when neither says. */
function shellOf(
  route: RouteRequest,
  profileShell: ShellMode | undefined,
): Pick<ExecJob, 'shell' | 'shellDefault'> {
  const shell = route.shell ?? profileShell
  if (shell) return { shell }
  return route.shellDefault === 'persistent' ? { shellDefault: 'persistent' } : {}
}

function reasonText(signal: AbortSignal | undefined): string {
  const r = signal ? abortReasonOf(signal) : undefined
  return r?.kind === 'cancelled' && r.reason && r.reason !== 'undefined' ? r.reason : 'the caller aborted'
}
