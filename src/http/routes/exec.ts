import { createRoute, z } from '@hono/zod-openapi'
import { streamSSE } from 'hono/streaming'
import { sseKeepAlive } from './stream-support.js'
import { AppError } from '../../errors.js'
import { noSuchJobMessage, unknownJobView, vanishedJobView } from '../../services/job-view.js'
import type { App } from '../app.js'
import type { JobView } from '../../services/index.js'
import type { AppDeps } from '../deps.js'
import {
  ErrorSchema,
  ExecInputSchema,
  IdParam,
  JobListQuery,
  JobListSchema,
  JobSchema,
  ToolCallInputSchema,
  ToolCallResultSchema,
} from '../schemas.js'
import { acceptedJobAnswer } from './job-answer.js'

const err = (description: string) => ({
  content: { 'application/json': { schema: ErrorSchema } },
  description,
})
const job = (description: string) => ({ content: { 'application/json': { schema: JobSchema } }, description })

const notFound = (id: string): AppError => new AppError('NOT_FOUND', noSuchJobMessage(id))

/** `POST /v1/exec`, `GET /v1/jobs`, `/v1/jobs/:id` (GET, DELETE, events) and `POST /v1/tool-calls`. */
export function registerExecRoutes(app: App, deps: AppDeps): void {
  const maxWaitMs = deps.limits?.maxWaitMs ?? 15 * 60_000

  app.openapi(
    createRoute({
      method: 'post',
      path: '/v1/exec',
      summary: 'Run a command in a sandbox',
      description:
        'Waits for the result by default: a job that ends within 250 ms is answered in one piece (200, the ' +
        'headers `X-Job-Id` and `Location: /v1/jobs/{id}`, its view); for a longer one, status 200 and those ' +
        'headers are sent after the 250 ms, newlines keep the connection alive, and the body is the ' +
        "job's view when it ends (or, past the wait, its current state; `unknown` when its result could not be " +
        'read). With `wait=false` answers 202 with the job at once. An `Idempotency-Key` header makes a ' +
        'repeated request return the same job. Any 4xx/5xx means the job was not accepted.',
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
        200: job('accepted: the job when it ended, or its state when the wait ran out'),
        202: job('accepted (`wait=false`); poll GET /v1/jobs/{id} or stream /events'),
        400: err('bad input (names the field), unknown provider or profile'),
        401: err('no or unknown key'),
        409: err('the Idempotency-Key was used before for a different request'),
        413: err('body too large'),
        429: err('rate limit or quota (nothing was accepted; Retry-After)'),
        503: err('queue or provider unavailable (nothing was accepted; Retry-After)'),
      },
    }),
    async (c) => {
      const { tenant } = c.get('principal')
      const input = c.req.valid('json')
      const key = c.req.valid('header')['idempotency-key']
      const submitted = await deps.exec.submit(tenant, input, {
        callId: key ? `idem:${key}` : `req:${crypto.randomUUID()}`,
      })
      c.header('X-Job-Id', submitted.id)
      c.header('Location', `/v1/jobs/${submitted.id}`)
      if (c.req.valid('query').wait === 'false') return c.json(submitted, 202)
      if (isTerminal(submitted)) return c.json(submitted, 200)
      const timeoutMs = Math.min(maxWaitMs, (input.timeoutMs ?? 600_000) + 30_000)
      const signal = c.req.raw.signal
      // Accepted: from here on the answer is this job's view, never an error status.
      return (await acceptedJobAnswer(submitted, async () => {
        try {
          const view = await deps.exec.wait(tenant, submitted.id, { timeoutMs, signal })
          return view ?? vanishedJobView(submitted)
        } catch (err) {
          deps.logger.warn(
            { err, jobId: submitted.id, requestId: c.get('requestId') },
            'the result of an accepted job could not be read',
          )
          return unknownJobView(submitted, err)
        }
      })) as never
    },
  )

  app.openapi(
    createRoute({
      method: 'get',
      path: '/v1/jobs',
      summary: "The tenant's recent jobs, newest first",
      description:
        'Jobs within the retention window (default 1 h), optionally of one session: a client that lost its ' +
        'connection before it learnt the job id finds its job here.',
      security: [{ bearer: [] }],
      request: { query: JobListQuery },
      responses: { 200: { content: { 'application/json': { schema: JobListSchema } }, description: 'jobs' } },
    }),
    async (c) => {
      const { sessionId, limit } = c.req.valid('query')
      const jobs = await deps.exec.list(c.get('principal').tenant, {
        ...(sessionId ? { sessionId } : {}),
        limit,
      })
      return c.json({ jobs }, 200)
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
      summary: 'Server-sent events: output so far and live (`stdout` / `stderr`), then `result`; resumable',
      description:
        "Every output event has an SSE `id`: the job's output bytes (stdout and stderr together) up to its " +
        'end. A client that lost the stream reconnects with the header `Last-Event-ID: <last id it got>` ' +
        '(EventSource does so by itself) and gets only later events, then `result`: no duplicates, no ' +
        'gaps. Without the header the stream starts with the output retained so far, so a second client ' +
        "(another process) can reattach to a running command. The last 1 MiB of a job's live output is " +
        'retained, while it runs and for a minute after; when what the client asks for is no longer ' +
        'retained, a `missed` event (`{"bytes": N}`) says how many bytes it will not get before the stream ' +
        'goes on (the `result` carries the whole output). Live output past the output cap stops at the ' +
        'head of the cap; the marker and the tail follow when the command ends.',
      security: [{ bearer: [] }],
      request: {
        params: IdParam,
        headers: z.object({
          'last-event-id': z
            .string()
            .regex(
              /^\d{1,15}$/,
              'Last-Event-ID must be the id of an event of this stream (digits: a byte offset); omit it to read from the start',
            )
            .optional(),
        }),
      },
      responses: {
        200: { content: { 'text/event-stream': { schema: z.string() } }, description: 'the event stream' },
        400: err('a Last-Event-ID that is not an event id'),
        404: err('no such job for this tenant'),
      },
    }),
    async (c) => {
      const { id } = c.req.valid('param')
      const last = c.req.valid('header')['last-event-id']
      const events = await deps.exec.events(c.get('principal').tenant, id, c.req.raw.signal, {
        after: last === undefined ? 0 : Number(last),
      })
      if (!events) throw notFound(id)
      return streamSSE(c, async (stream) => {
        const alive = sseKeepAlive(stream, deps.limits?.sseKeepAliveMs)
        try {
          for await (const e of events) {
            if (e.type === 'result') await stream.writeSSE({ event: 'result', data: JSON.stringify(e.job) })
            else if (e.type === 'missed')
              await stream.writeSSE({
                event: 'missed',
                id: String(e.id),
                data: JSON.stringify({ bytes: e.bytes }),
              })
            else await stream.writeSSE({ event: e.type, id: String(e.id), data: JSON.stringify(e.data) })
            alive.wrote()
          }
        } finally {
          alive.stop()
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
        'Returns the decision and, for blocked and routed calls, `output`: the model-facing text the agent ' +
        'loop would give its model (the after-chain applied: secret scanning etc.), with `outcome`.',
      security: [{ bearer: [] }],
      request: { body: { content: { 'application/json': { schema: ToolCallInputSchema } }, required: true } },
      responses: {
        200: {
          content: { 'application/json': { schema: ToolCallResultSchema } },
          description: 'the evaluation (routed calls: with the job that ran the command)',
        },
        400: err('bad input'),
        401: err('no or unknown key'),
        429: err('rate limit or quota (nothing was accepted; Retry-After)'),
        503: err('the queue is unavailable: nothing was accepted; retry after Retry-After'),
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
  return job.state !== 'queued' && job.state !== 'running' && job.state !== 'unknown'
}
