import { z } from 'zod'
import { ExecResultSchema } from '../queue/schemas.js'
import { Env, SessionId } from './common.js'
import { MAX_COMMAND_BYTES, checkCommand, checkCwd, checkEnv } from './input-limits.js'

/** A command submitted over the API: the one schema of the body (`POST /v1/exec`) and its type. */
export const ExecInput = z
  .object({
    provider: z.string().min(1).meta({ example: 'docker' }),
    profile: z.string().min(1).meta({ example: 'default' }),
    // Bounded in bytes (MAX_COMMAND_BYTES, the shell's one-argument limit) by the refinement below.
    command: z.string().min(1).max(MAX_COMMAND_BYTES).meta({ example: 'echo hello' }),
    sessionId: SessionId.optional(),
    cwd: z.string().startsWith('/').max(4096).optional(),
    env: Env.optional(),
    stdin: z.string().max(1_000_000).optional(),
    timeoutMs: z.number().int().positive().max(86_400_000).optional(),
    idempotent: z.boolean().optional(),
    /** `persistent`: the session's long-lived shell; absent: the profile's shell, else `fresh`. */
    shell: z
      .enum(['persistent', 'fresh'])
      .optional()
      .meta({
        description:
          "'persistent': the session's long-lived shell (keeps cwd, exported variables, functions, aliases; " +
          "needs bash in the image: elsewhere a 400 that says to use 'fresh'); " +
          "'fresh': a new bash -c (sh -c in an image without bash). Default: the profile's shell, else 'fresh'",
      }),
  })
  .strict()
  .superRefine((input, ctx) => {
    checkCommand(input.command, ['command'], ctx)
    if (input.cwd !== undefined) checkCwd(input.cwd, ['cwd'], ctx)
    if (input.env) checkEnv(input.env, ctx)
  })
export type ExecInput = z.infer<typeof ExecInput>

/**
 * Where a job is. `unknown`: the job was accepted, but its state could not be read (Redis away past
 * the wait, or its record gone); `error` says why and what to do.
 */
export const JobState = z.enum([
  'queued',
  'running',
  'completed',
  'failed',
  'interrupted',
  'cancelled',
  'unknown',
])
export type JobState = z.infer<typeof JobState>

/** A job as the API shows it (tenant-scoped): the one schema of the view and its type. */
export const JobView = z.object({
  id: z.string(),
  state: JobState,
  provider: z.string(),
  profile: z.string(),
  sessionId: z.string().optional(),
  result: ExecResultSchema.optional(),
  error: z.object({ code: z.string(), message: z.string() }).optional(),
  /**
   * For an `interrupted` job: the bounded tail of the output its attempt had published before it was
   * interrupted. Partial by nature: the command may have printed more.
   */
  partialOutput: z
    .object({ stdout: z.string(), stderr: z.string() })
    .optional()
    .meta({ description: 'interrupted jobs: the bounded tail of output published before the interruption' }),
  createdAt: z.number(),
  finishedAt: z.number().optional(),
})
export type JobView = z.infer<typeof JobView>

/**
 * A live event of a job: output chunks, then its final view. `id` is the job's output bytes up to
 * the end of the event (the SSE id a reader resumes after); `missed` says that many bytes before
 * `id` were no longer retained when the reader asked for them.
 */
export type JobEvent =
  | { type: 'stdout' | 'stderr'; data: string; id: number }
  | { type: 'missed'; bytes: number; id: number }
  | { type: 'result'; job: JobView }

/** Commands as jobs. Every method is tenant-scoped: another tenant's ids are `undefined`. */
export interface ExecService {
  /** Submits (or finds, for a repeated `callId`) a job. */
  submit(tenant: string, input: ExecInput, opts: { callId: string }): Promise<JobView>
  /**
   * Waits until the job is terminal, the deadline passes (returns the current view) or the signal
   * aborts. Redis outages are ridden out until the deadline; rejects with QUEUE_UNAVAILABLE when Redis
   * stayed away. `undefined` when the job is not (or no longer: lost, past retention) the tenant's.
   */
  wait(
    tenant: string,
    id: string,
    opts: { timeoutMs: number; signal?: AbortSignal },
  ): Promise<JobView | undefined>
  get(tenant: string, id: string): Promise<JobView | undefined>
  /** The tenant's recent jobs (within retention), newest first; optionally of one session. */
  list(tenant: string, filter: { sessionId?: string; limit: number }): Promise<JobView[]>
  cancel(tenant: string, id: string): Promise<JobView | undefined>
  /**
   * The job's retained output past `after` (default 0: all of it, for a reader reattaching), then
   * live output, then the result; ends after the result. Each chunk once, in order. `undefined` when
   * the job is not the tenant's.
   */
  events(
    tenant: string,
    id: string,
    signal: AbortSignal,
    opts?: { after?: number },
  ): Promise<AsyncIterable<JobEvent> | undefined>
}
