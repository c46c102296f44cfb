import { z } from 'zod'
import type { ErrorCode } from '../errors.js'

/*
 * Job payloads cross process boundaries (Redis), so both directions are zod schemas: the worker
 * parses what it takes off the queue, the waiter parses what comes back.
 */

const ERROR_CODES = [
  'BAD_REQUEST',
  'CONFIG_INVALID',
  'UNAUTHORIZED',
  'FORBIDDEN',
  'NOT_FOUND',
  'CONFLICT',
  'PAYLOAD_TOO_LARGE',
  'RATE_LIMITED',
  'UNAVAILABLE',
  'EXTENSION_ERROR',
  'INTERCEPTOR_FAILED',
  'UNKNOWN_PROVIDER',
  'UNKNOWN_PROFILE',
  'SANDBOX_LOST',
  'SANDBOX_CREATE_FAILED',
  'SANDBOX_TIMEOUT',
  'ACQUIRE_TIMEOUT',
  'QUOTA_EXCEEDED',
  'NO_SPACE',
  'JOB_INTERRUPTED',
  'JOB_CANCELLED',
  'QUEUE_UNAVAILABLE',
  'UNSUPPORTED',
  'PORT_UNREACHABLE',
  'INTERNAL',
] as const satisfies readonly ErrorCode[]

// Compile-time proof that the list above names every ErrorCode.
type MissingCodes = Exclude<ErrorCode, (typeof ERROR_CODES)[number]>
const everyCodeListed: MissingCodes extends never ? true : false = true
void everyCodeListed

/** Any {@link ErrorCode}. */
export const ErrorCodeSchema = z.enum(ERROR_CODES)

/** One routed command as it travels through the queue. */
export const ExecJobSchema = z
  .object({
    /** Derived from (tenant, callId): see `deriveJobId`. */
    jobId: z.string().min(1),
    tenant: z.string().min(1),
    /** Session key parts are tenant, sessionId, providerId, profile. Absent: an ephemeral sandbox. */
    sessionId: z.string().min(1).optional(),
    providerId: z.string().min(1),
    profile: z.string().min(1),
    command: z.string(),
    cwd: z.string().optional(),
    env: z.record(z.string(), z.string()).optional(),
    stdin: z.string().optional(),
    /** Already clamped to the profile's max (ms). */
    timeoutMs: z.number().int().positive(),
    /** Per-stream output cap (bytes), from the profile. */
    outputCapBytes: z.number().int().positive(),
    /** A redelivered job may run again instead of reporting `interrupted`. */
    idempotent: z.boolean(),
    /**
     * The shell asked for by the call or its profile (`persistent` fails where the provider has
     * none). Absent: `shellDefault`, else `fresh`. Only set when not `fresh`-by-default, so workers
     * from before this field still take the jobs that do not need it.
     */
    shell: z.enum(['persistent', 'fresh']).optional(),
    /** The surface's default (tool calls: `persistent`), used only where the provider has persistent shells. */
    shellDefault: z.enum(['persistent', 'fresh']).optional(),
    /**
     * Set for a routed code cell (`routeCode`): `command` is the cell's source, run in the session's
     * stateful kernel of `language` instead of a shell. Workers from before this field refuse such a
     * job (the schema is strict: `Malformed job payload`), so a cell never runs as a shell command.
     */
    code: z
      .object({ language: z.enum(['python', 'javascript']) })
      .strict()
      .optional(),
    callId: z.string().min(1),
    toolName: z.string(),
    /** Epoch ms when the router submitted the job. */
    submittedAt: z.number(),
  })
  .strict()

/** One routed command as it travels through the queue. */
export type ExecJob = z.output<typeof ExecJobSchema>

/** A session's sandbox was replaced, its files lost (`SandboxReplacement` of src/sessions). */
export const SandboxReplacementSchema = z.object({
  /** When the loss was noticed (ms since epoch). */
  at: z.number(),
  reason: z.string(),
  filesLost: z.literal(true),
  previousSandboxId: z.string(),
  /** The profile's persistent `/workspace` was kept; only files elsewhere and processes were lost. */
  workspaceKept: z.literal(true).optional(),
})

/** What a code cell produced besides its stdout and stderr (`CodeCellPart` of src/sandbox/code). */
export const CodeCellPartSchema = z.object({
  language: z.enum(['python', 'javascript']),
  /** `text/plain` of the cell's last value; `null` when it has none. */
  text: z.string().nullable(),
  error: z.object({ name: z.string(), value: z.string(), traceback: z.string() }).nullable(),
  executionCount: z.number().int(),
  kernelRestarted: z.boolean(),
  /** The cell's rich outputs by MIME type (their data is fetched with `POST /v1/sessions/{id}/code`). */
  outputs: z.array(z.object({ type: z.enum(['display', 'result']), mimeTypes: z.array(z.string()) })),
})

/** The normalised result of a command (mirrors `ExecResult` of src/sandbox). */
export const ExecResultSchema = z.object({
  exitCode: z.number().int().nullable(),
  signal: z.string().optional(),
  stdout: z.string(),
  stderr: z.string(),
  timedOut: z.boolean(),
  truncated: z.boolean(),
  durationMs: z.number(),
  sandboxId: z.string(),
  /** Persistent shell calls: the shell did not hold the previous call's state (it died and was restarted). */
  shellRestarted: z.boolean().optional(),
  /**
   * Set while the session's sandbox was replaced by an empty one (files lost) and the user has not
   * acknowledged it (`POST /v1/sessions/{id}/ack`).
   */
  sandboxReplaced: SandboxReplacementSchema.optional(),
  /**
   * Code cells (`routeCode`): the value, the exception and the kernel's state. `exitCode` is 0, or 1
   * when the cell raised; `stdout`/`stderr` are the cell's.
   */
  code: CodeCellPartSchema.optional(),
  /** Calls routed by a policy: the candidate that ran it, and why earlier ones did not. */
  route: z
    .object({
      policy: z.string(),
      providerId: z.string(),
      profile: z.string(),
      pinned: z.boolean(),
      skipped: z.array(z.object({ providerId: z.string(), profile: z.string(), reason: z.string() })),
    })
    .optional(),
})

/** What is known about an earlier execution attempt (the fence record). */
export const FenceRecordSchema = z.object({
  attempt: z.number().int().positive(),
  workerId: z.string(),
  /** Epoch ms when the command was handed to the sandbox. */
  startedAt: z.number(),
  sandboxId: z.string().optional(),
})

/** What is known about an earlier execution attempt (the fence record). */
export type FenceRecord = z.output<typeof FenceRecordSchema>

/**
 * How a job ended, for a job kind whose `completed` jobs carry a `TValue`. Every driver resolves a
 * job with exactly one of these; the other three are the queue's own (fence, cancel, processor error).
 */
export type JobResult<TValue = unknown> =
  | { status: 'completed'; result: TValue; attempt: number; workerId: string }
  /** A previous attempt may have run (part of) the job; it was not run again. */
  | {
      status: 'interrupted'
      message: string
      previous?: FenceRecord
      /** Output the previous attempt published before it was interrupted (a bounded tail). */
      stdout: string
      stderr: string
    }
  | { status: 'cancelled'; reason: string }
  | { status: 'failed'; code: z.output<typeof ErrorCodeSchema>; message: string; retryable: boolean }

/** The schema of {@link JobResult} for a job kind whose `completed` value is `value`. */
export function jobResultSchema<TValue>(value: z.ZodType<TValue>): z.ZodType<JobResult<TValue>> {
  return z.discriminatedUnion('status', [
    z.object({
      status: z.literal('completed'),
      result: value,
      attempt: z.number().int().positive(),
      workerId: z.string(),
    }),
    z.object({
      status: z.literal('interrupted'),
      message: z.string(),
      previous: FenceRecordSchema.optional(),
      stdout: z.string(),
      stderr: z.string(),
    }),
    z.object({ status: z.literal('cancelled'), reason: z.string() }),
    z.object({
      status: z.literal('failed'),
      code: ErrorCodeSchema,
      message: z.string(),
      retryable: z.boolean(),
    }),
  ]) as z.ZodType<JobResult<TValue>>
}

/**
 * Any job's result as the queue machinery stores and reads it (fence records, the `redis` driver's
 * job hash): the `completed` value is checked by the job kind's own schema at the queue's edge.
 */
export const JobResultSchema = jobResultSchema(z.unknown())

/** The normalised result of a command. */
export type ExecResult = z.output<typeof ExecResultSchema>

/** How an exec job ended. */
export const ExecJobResultSchema = jobResultSchema(ExecResultSchema)

/** How an exec job ended. */
export type ExecJobResult = JobResult<ExecResult>

/**
 * What the queue machinery reads of any job's payload (a job kind's schema has at least these):
 * its id, its tenant (the job index, tenant-scoped listing), optionally its session (the session's
 * index) and whether a redelivery may run it again (the fence).
 */
export interface QueueJob {
  readonly jobId: string
  readonly tenant: string
  readonly sessionId?: string | undefined
  /** A redelivered job may run again instead of reporting `interrupted`. */
  readonly idempotent: boolean
  /** Epoch ms when it was submitted (index order). */
  readonly submittedAt: number
}

/** A live piece of a job's output. */
export interface OutputChunk {
  readonly stream: 'stdout' | 'stderr'
  readonly data: string
}

/** A live chunk as readers get it: `offset` is the job's output bytes up to and including it (see output-log.ts). */
export interface LoggedChunk extends OutputChunk {
  readonly offset: number
}
