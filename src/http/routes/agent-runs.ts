import { createRoute, z } from '@hono/zod-openapi'
import { streamSSE } from 'hono/streaming'
import { sseKeepAlive } from './stream-support.js'
import { AppError } from '../../errors.js'
import type { App } from '../app.js'
import type { AppDeps } from '../deps.js'
import { AgentRunInputSchema, AgentRunSchema, ErrorSchema, IdParam } from '../schemas.js'

const err = (description: string) => ({
  content: { 'application/json': { schema: ErrorSchema } },
  description,
})

const run = (description: string) => ({
  content: { 'application/json': { schema: AgentRunSchema } },
  description,
})
const notFound = (id: string): AppError => new AppError('NOT_FOUND', `no agent run ${id}`)

/** `/v1/agent-runs`: queued agent runs executed by agent-run workers. */
export function registerAgentRunRoutes(app: App, deps: AppDeps): void {
  app.openapi(
    createRoute({
      method: 'post',
      path: '/v1/agent-runs',
      summary:
        'Start an agent run (the agent loop with the configured model; its shell is routed into sandboxes)',
      security: [{ bearer: [] }],
      request: { body: { content: { 'application/json': { schema: AgentRunInputSchema } }, required: true } },
      responses: { 202: run('queued'), 400: err('bad input or no model configured') },
    }),
    async (c) => c.json(await deps.agentRuns.submit(c.get('principal').tenant, c.req.valid('json')), 202),
  )
  app.openapi(
    createRoute({
      method: 'get',
      path: '/v1/agent-runs/{id}',
      summary: 'Status, output, finish reason, usage and tool calls of a run',
      security: [{ bearer: [] }],
      request: { params: IdParam },
      responses: { 200: run('the run'), 404: err('no such run for this tenant') },
    }),
    async (c) => {
      const { id } = c.req.valid('param')
      const r = await deps.agentRuns.get(c.get('principal').tenant, id)
      if (!r) throw notFound(id)
      return c.json(r, 200)
    },
  )
  app.openapi(
    createRoute({
      method: 'delete',
      path: '/v1/agent-runs/{id}',
      summary: 'Cancel a run',
      security: [{ bearer: [] }],
      request: { params: IdParam },
      responses: { 200: run('the run after the cancel request'), 404: err('no such run for this tenant') },
    }),
    async (c) => {
      const { id } = c.req.valid('param')
      const r = await deps.agentRuns.cancel(c.get('principal').tenant, id)
      if (!r) throw notFound(id)
      return c.json(r, 200)
    },
  )
  app.openapi(
    createRoute({
      method: 'get',
      path: '/v1/agent-runs/{id}/events',
      summary: 'Server-sent lifecycle events of a run (`lifecycle`), then `end` with the final run',
      security: [{ bearer: [] }],
      request: { params: IdParam },
      responses: {
        200: { content: { 'text/event-stream': { schema: z.string() } }, description: 'events' },
        404: err('no such run'),
      },
    }),
    async (c) => {
      const { id } = c.req.valid('param')
      const items = await deps.agentRuns.stream(c.get('principal').tenant, id, c.req.raw.signal)
      if (!items) throw notFound(id)
      return streamSSE(c, async (stream) => {
        const alive = sseKeepAlive(stream, deps.limits?.sseKeepAliveMs)
        try {
          for await (const item of items) {
            if (item.kind === 'event')
              await stream.writeSSE({
                event: 'lifecycle',
                id: String(item.event.seq),
                data: JSON.stringify(item.event),
              })
            else await stream.writeSSE({ event: 'end', data: JSON.stringify(item.run) })
            alive.wrote()
          }
        } finally {
          alive.stop()
        }
      }) as never
    },
  )
}
