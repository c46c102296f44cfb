import { createRoute, z } from '@hono/zod-openapi'
import { streamSSE } from 'hono/streaming'
import { AppError } from '../../errors.js'
import type { App } from '../app.js'
import type { AppDeps, JobView } from '../deps.js'
import {
  ErrorSchema,
  ExecInputSchema,
  IdParam,
  JobSchema,
  ToolCallInputSchema,
  ToolCallResultSchema,
} from '../schemas.js'

const err = (description: string) => ({
  content: { 'application/json': { schema: ErrorSchema } },
  description,
})
const job = (description: string) => ({ content: { 'application/json': { schema: JobSchema } }, description })

const notFound = (id: string): AppError => new AppError('NOT_FOUND', `no job ${id}`)

/** `POST /v1/exec`, `/v1/jobs/:id` (GET, DELETE, events) and `POST /v1/tool-calls`. */
export function registerExecRoutes(app: App, deps: AppDeps): void {
  const maxWaitMs = deps.limits?.maxWaitMs ?? 15 * 60_000

  app.openapi(
    createRoute({
      method: 'post',
      path: '/v1/exec',
      summary: 'Run a command in a sandbox',
      description:
        'Waits for the result by default (200); with `wait=false` answers 202 with the job id. An `Idempotency-Key` header makes a repeated request return the same job.',
      security: [{ bearer: [] }],
      request: {
        query: z.object({
          wait: z
            .enum(['true', 'false'])
            .default('true')
            .openapi({ param: { name: 'wait', in: 'query' } }),
        }),
        headers: z.object({
          'idempotency-key': z
            .string()
            .regex(/^[A-Za-z0-9._:-]{1,128}$/)
            .optional(),
        }),
        body: { content: { 'application/json': { schema: ExecInputSchema } }, required: true },
      },
      responses: {
        200: job('finished job with its result'),
        202: job('accepted; poll GET /v1/jobs/{id} or stream /events'),
        400: err('bad input (names the field), unknown provider or profile'),
        401: err('no or unknown key'),
        413: err('body too large'),
        429: err('rate limit or quota'),
        503: err('queue or provider unavailable'),
      },
    }),
    async (c) => {
      const { tenant } = c.get('principal')
      const input = c.req.valid('json')
      const key = c.req.valid('header')['idempotency-key']
      const submitted = await deps.exec.submit(tenant, input, {
        callId: key ? `idem:${key}` : `req:${crypto.randomUUID()}`,
      })
      if (c.req.valid('query').wait === 'false') return c.json(submitted, 202)
      const timeoutMs = Math.min(maxWaitMs, (input.timeoutMs ?? 600_000) + 30_000)
      const done = await deps.exec.wait(tenant, submitted.id, { timeoutMs, signal: c.req.raw.signal })
      const view = done ?? submitted
      return c.json(view, isTerminal(view) ? 200 : 202)
    },
  )

  app.openapi(
    createRoute({
      method: 'get',
      path: '/v1/jobs/{id}',
      summary: 'A job and, when finished, its result',
      security: [{ bearer: [] }],
      request: { params: IdParam },
      responses: { 200: job('the job'), 404: err('no such job for this tenant') },
    }),
    async (c) => {
      const { id } = c.req.valid('param')
      const view = await deps.exec.get(c.get('principal').tenant, id)
      if (!view) throw notFound(id)
      return c.json(view, 200)
    },
  )

  app.openapi(
    createRoute({
      method: 'delete',
      path: '/v1/jobs/{id}',
      summary: 'Cancel a job (kills its process in the sandbox)',
      security: [{ bearer: [] }],
      request: { params: IdParam },
      responses: { 200: job('the job after the cancel request'), 404: err('no such job for this tenant') },
    }),
    async (c) => {
      const { id } = c.req.valid('param')
      const view = await deps.exec.cancel(c.get('principal').tenant, id)
      if (!view) throw notFound(id)
      return c.json(view, 200)
    },
  )

  app.openapi(
    createRoute({
      method: 'get',
      path: '/v1/jobs/{id}/events',
      summary: 'Server-sent events: `stdout` / `stderr` chunks live, then `result`',
      security: [{ bearer: [] }],
      request: { params: IdParam },
      responses: {
        200: { content: { 'text/event-stream': { schema: z.string() } }, description: 'the event stream' },
        404: err('no such job for this tenant'),
      },
    }),
    async (c) => {
      const { id } = c.req.valid('param')
      const events = await deps.exec.events(c.get('principal').tenant, id, c.req.raw.signal)
      if (!events) throw notFound(id)
      return streamSSE(c, async (stream) => {
        for await (const e of events) {
          if (e.type === 'result') await stream.writeSSE({ event: 'result', data: JSON.stringify(e.job) })
          else await stream.writeSSE({ event: e.type, data: JSON.stringify(e.data) })
        }
      }) as never
    },
  )

  app.openapi(
    createRoute({
      method: 'post',
      path: '/v1/tool-calls',
      summary: "Evaluate a tool call through the server's interceptor chain",
      description:
        'Returns the decision and, when routed, the result after the after-chain (secret scanning etc.).',
      security: [{ bearer: [] }],
      request: { body: { content: { 'application/json': { schema: ToolCallInputSchema } }, required: true } },
      responses: {
        200: {
          content: { 'application/json': { schema: ToolCallResultSchema } },
          description: 'the evaluation',
        },
        400: err('bad input'),
      },
    }),
    async (c) => {
      const body = c.req.valid('json')
      const args = typeof body.arguments === 'string' ? body.arguments : stringifyArguments(body.arguments)
      const evaluation = await deps.toolCalls.evaluate(
        c.get('principal').tenant,
        {
          name: body.name,
          arguments: args,
          callId: body.callId ?? `tc-${crypto.randomUUID()}`,
          type: body.type,
        },
        { ...(body.sessionId ? { sessionId: body.sessionId } : {}), signal: c.req.raw.signal },
      )
      return c.json(evaluation, 200)
    },
  )
}

/** `arguments` as JSON text; nesting too deep to serialise (a stack overflow) is the caller's error. */
function stringifyArguments(args: Record<string, unknown>): string {
  try {
    return JSON.stringify(args)
  } catch (err) {
    throw new AppError('BAD_REQUEST', 'invalid request at "arguments": nested too deeply; flatten it', {
      cause: err,
    })
  }
}

function isTerminal(job: JobView): boolean {
  return job.state !== 'queued' && job.state !== 'running'
}
