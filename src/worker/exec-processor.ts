import { AppError } from '../errors.js'
import { resultOfOutcome } from '../queue/fence.js'
import type { ExecJob, ExecJobResult } from '../queue/schemas.js'
import type { JobContext, JobProcessor } from '../queue/types.js'
import type { LeaseOutcome, SessionKey, SessionPool } from '../sessions/types.js'
import type { ShellMode } from '../sandbox/types.js'
import type { PolicyLease } from '../routing/policy-pool.js'
import { runCodeJob } from './code-cell.js'

/** Reports errors that do not change a job's result (e.g. a failed lease release). */
export type WorkerErrorHandler = (err: unknown, context: string) => void

/** Options of {@link createExecProcessor}. */
export interface ExecProcessorOptions {
  /** Where sandboxes come from: session affinity, warm pools, leases. */
  pool: SessionPool
  /** Give up acquiring a sandbox after this long (ms). @default the pool's default */
  acquireTimeoutMs?: number
  /** @default ignore */
  onError?: WorkerErrorHandler
}

/** The session key of a job: (tenant, sessionId, providerId, profile); no sessionId means ephemeral. */
export function sessionKeyOf(job: ExecJob): SessionKey {
  const key = { tenant: job.tenant, providerId: job.providerId, profile: job.profile }
  return job.sessionId === undefined ? key : { ...key, sessionId: job.sessionId }
}

/** The exec processor plus a way to wait for its background lease releases. */
export interface ExecProcessor extends JobProcessor {
  /** Resolves when every lease release started so far has finished. */
  idle(): Promise<void>
}

/**
 * The processor of exec jobs: lease the session's sandbox, pass the fence right before the command
 * (so a redelivery after a crash reports `interrupted` instead of running it twice), run the command
 * with the job's deadline and the job's signal (a cancel kills the process group in the sandbox),
 * publish live output, and release the lease — `lost` when the sandbox vanished. A code job
 * (`job.code`) runs its cell in the session's kernel instead (see {@link runCodeJob}). The release runs
 * after the result is handed back (leases of a session are not exclusive), off the caller's path.
 */
export function createExecProcessor(options: ExecProcessorOptions): ExecProcessor {
  const onError = options.onError ?? (() => {})
  const releasing = new Set<Promise<void>>()
  const processExecJob = async function processExecJob(
    job: ExecJob,
    ctx: JobContext,
  ): Promise<ExecJobResult> {
    const lease = await options.pool.acquire(sessionKeyOf(job), {
      signal: ctx.signal,
      ...(options.acquireTimeoutMs === undefined ? {} : { timeoutMs: options.acquireTimeoutMs }),
    })
    let outcome: LeaseOutcome = 'ok'
    let lostReason: string | undefined
    try {
      const early = resultOfOutcome(await ctx.fence.begin({ sandboxId: lease.ref.id }))
      if (early) return early
      const { code } = job
      const result = code
        ? await runCodeJob(lease.sandbox, { ...job, code }, ctx.signal)
        : await lease.sandbox.exec(
            {
              command: job.command,
              cwd: job.cwd,
              env: job.env,
              stdin: job.stdin,
              timeoutMs: job.timeoutMs,
              outputCapBytes: job.outputCapBytes,
              ...shellOfJob(job, lease.sandbox.persistentShell),
            },
            {
              signal: ctx.signal,
              onStdout: (data) => ctx.publish({ stream: 'stdout', data }),
              onStderr: (data) => ctx.publish({ stream: 'stderr', data }),
            },
          )
      const replaced = lease.sandboxReplaced
      const route = (lease as PolicyLease).route
      return {
        status: 'completed',
        result: {
          ...result,
          ...(replaced ? { sandboxReplaced: replaced } : {}),
          ...(route ? { route: { ...route, skipped: [...route.skipped] } } : {}),
        },
        attempt: ctx.attempt,
        workerId: ctx.workerId,
      }
    } catch (err) {
      if (err instanceof AppError && err.code === 'SANDBOX_LOST') {
        outcome = 'lost'
        lostReason = err.message
        // The sandbox died because its session was deleted: say so, not "the container stopped".
        if (job.sessionId !== undefined && (await lease.closedMeanwhile().catch(() => false))) {
          outcome = 'ok'
          return {
            status: 'cancelled',
            reason:
              `session '${job.sessionId}' was deleted while the command ran ` +
              `(DELETE /v1/sessions/${job.sessionId}): the command was killed with the session's sandbox`,
          }
        }
        const next =
          job.sessionId === undefined
            ? ''
            : "; the session's next call runs in a fresh, empty sandbox (its files are lost; see sandboxReplaced)"
        throw new AppError(
          'SANDBOX_LOST',
          `${err.message}. The command may have run partly (or not at all)${next}`,
          { retryable: err.retryable, cause: err },
        )
      }
      throw err
    } finally {
      const p: Promise<void> = lease
        .release(outcome, lostReason)
        .catch((err: unknown) => onError(err, `releasing the lease of job ${job.jobId}`))
        .finally(() => releasing.delete(p))
      releasing.add(p)
      // An ephemeral sandbox stops counting against the tenant's quota before the result is seen, so
      // a client that runs one call after another never meets its own finished call's sandbox.
      if (job.sessionId === undefined && lease.freed) await lease.freed
    }
  }
  return Object.assign(processExecJob, {
    idle: async () => {
      while (releasing.size > 0) await Promise.all(releasing)
    },
  })
}

/**
 * The shell a job's command runs in: the one it asks for, else its surface default where the
 * sandbox has persistent shells, else fresh. `persistentShell` is the sandbox's
 * `Sandbox.persistentShell`: `undefined` (the provider has none) makes an explicit
 * `persistent` a `BAD_REQUEST` here; `false` (this sandbox has none, e.g. a Docker image without
 * bash) passes it on, and the sandbox refuses it saying why.
 */
export function shellOfJob(job: ExecJob, persistentShell: boolean | undefined): { shell?: ShellMode } {
  if (job.shell === 'persistent' && persistentShell === undefined) {
    throw new AppError(
      'BAD_REQUEST',
      `provider '${job.providerId}' has no persistent shells yet; run the command with shell: 'fresh' ` +
        `(or set profile '${job.profile}' shell to 'fresh')`,
    )
  }
  if (job.shell) return { shell: job.shell }
  return job.shellDefault === 'persistent' && persistentShell === true ? { shell: 'persistent' } : {}
}
