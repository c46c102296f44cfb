import { z } from '@hono/zod-openapi'
import { ExecResultSchema as QueueExecResultSchema } from '../queue/schemas.js'
import {
  AgentRunInput,
  AgentRunView,
  ExecInput,
  JobView,
  SessionId,
  SessionInput,
  SessionView,
} from '../services/index.js'
import { checkToolArguments } from '../services/input-limits.js'

export const ErrorSchema = z
  .object({ error: z.object({ code: z.string().openapi({ example: 'NOT_FOUND' }), message: z.string() }) })
  .openapi('Error')

/** A client-chosen session id: in every body that names a session (src/services/common.ts). */
export const SessionIdSchema = SessionId

/** The body of `POST /v1/exec`: the exec service's schema, with its OpenAPI name. */
export const ExecInputSchema = ExecInput.openapi('ExecInput')

/** The normalised command result: the queue's schema, re-declared with OpenAPI metadata. */
export const ExecResultSchema = z.object(QueueExecResultSchema.shape).openapi('ExecResult')

/**
 * A job as the API shows it: the exec service's schema, with its OpenAPI name (its result refers to
 * the named `ExecResult`).
 */
export const JobSchema = JobView.extend({ result: ExecResultSchema.optional() }).openapi('Job')

export const JobListQuery = z.object({
  sessionId: z
    .string()
    .regex(/^[A-Za-z0-9._-]{1,128}$/)
    .optional()
    .openapi({ param: { name: 'sessionId', in: 'query' } }),
  limit: z.coerce
    .number()
    .int()
    .min(1)
    .max(100)
    .default(20)
    .openapi({ param: { name: 'limit', in: 'query' } }),
})

export const JobListSchema = z.object({ jobs: z.array(JobSchema) }).openapi('JobList')

export const ToolCallInputSchema = z
  .object({
    name: z.string().min(1).max(256).openapi({ example: 'bash' }),
    arguments: z
      .union([z.string().max(1_000_000), z.record(z.string(), z.unknown())])
      .openapi({ example: { command: 'ls -la' } }),
    callId: z
      .string()
      .regex(/^[A-Za-z0-9._:-]{1,128}$/)
      .optional(),
    type: z.string().default('function'),
    sessionId: SessionIdSchema.optional(),
  })
  .strict()
  .superRefine((input, ctx) => checkToolArguments(input.name, input.arguments, ctx))
  .openapi('ToolCallInput')

export const ToolCallResultSchema = z
  .object({
    decision: z.object({
      kind: z.enum(['allow', 'block', 'routeTo']),
      reason: z.string().optional(),
      providerId: z.string().optional(),
      profile: z.string().optional(),
      command: z.string().optional(),
      run: z
        .object({ kind: z.literal('code'), language: z.enum(['python', 'javascript']) })
        .optional()
        .openapi({ description: "a routed code cell: `command` ran in the session's kernel of `language`" }),
      decidedBy: z.string().optional(),
    }),
    request: z.object({ name: z.string(), arguments: z.string(), callId: z.string(), type: z.string() }),
    output: z.string().optional(),
    outcome: z.enum(['ok', 'error', 'blocked']).optional(),
    result: ExecResultSchema.optional(),
    blocked: z.boolean().optional(),
    job: z.object({ id: z.string(), state: z.string() }).optional(),
  })
  .openapi('ToolCallResult')

/** The body of `POST /v1/sessions`: the session service's schema, with its OpenAPI name. */
export const SessionInputSchema = SessionInput.openapi('SessionInput')

/** A session as the API shows it: the session service's schema, with its OpenAPI name. */
export const SessionSchema = SessionView.openapi('Session')

/** The `:id` of a job, session or agent run; no id of any kind is a dot segment (`.`, `..`). */
export const IdParam = z.object({
  id: z
    .string()
    .min(1)
    .max(256)
    .refine((id) => id !== '.' && id !== '..', {
      message: 'an id is never "." or ".." (a dot segment of a URL path)',
    })
    .openapi({ param: { name: 'id', in: 'path' } }),
})

export const PathQuery = z.object({
  path: z
    .string()
    .min(1)
    .max(4096)
    .openapi({ param: { name: 'path', in: 'query' }, example: 'notes.txt' }),
})

/** The body of `POST /v1/agent-runs`: the agent-run service's schema, with its OpenAPI name. */
export const AgentRunInputSchema = AgentRunInput.openapi('AgentRunInput')

/**
 * An agent run as the API shows it: the agent-run service's schema, with its OpenAPI name (its
 * request refers to the named `AgentRunInput`).
 */
export const AgentRunSchema = AgentRunView.extend({ request: AgentRunInputSchema }).openapi('AgentRun')
