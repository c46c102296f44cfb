import { createRoute, z } from '@hono/zod-openapi'
import { streamSSE } from 'hono/streaming'
import { sseKeepAlive } from './stream-support.js'
import { AppError } from '../../errors.js'
import { isServiceEventId } from '../../lifecycle/service-events.js'
import type { App } from '../app.js'
import type { AppDeps } from '../deps.js'
import { ErrorSchema } from '../schemas.js'

/**
 * `GET /v1/events`: the service's own lifecycle events (circuit transitions of providers) as
 * server-sent `lifecycle` events, retained ones first, then live; resumable with `Last-Event-ID`.
 */
export function registerEventRoutes(app: App, deps: AppDeps): void {
  app.openapi(
    createRoute({
      method: 'get',
      path: '/v1/events',
      summary: 'Server-sent lifecycle events of the service (`lifecycle`: circuit transitions of providers)',
      description:
        'Each provider circuit transition once, fleet-wide: `CIRCUIT_OPEN`, `CIRCUIT_HALF_OPEN`, ' +
        '`CIRCUIT_CLOSED`, with `attributes.provider`, `from`, `to`, `failures`, `reason` (and ' +
        '`openUntil` when opened). Without `Last-Event-ID` the stream starts with the events retained ' +
        '(the last 1000); with it, only later ones. The stream stays open until the client leaves.',
      security: [{ bearer: [] }],
      request: {
        headers: z.object({
          'last-event-id': z
            .string()
            .refine(
              isServiceEventId,
              'Last-Event-ID must be the id of an event of this stream (`<n>` or `<n>-<n>`); omit it to read the retained events',
            )
            .optional(),
        }),
      },
      responses: {
        200: { content: { 'text/event-stream': { schema: z.string() } }, description: 'the event stream' },
        400: {
          content: { 'application/json': { schema: ErrorSchema } },
          description: 'a Last-Event-ID that is not an event id',
        },
      },
    }),
    (c) => {
      const log = deps.serviceEvents
      if (!log) throw new AppError('UNSUPPORTED', 'this server keeps no service event log (GET /v1/events)')
      const after = c.req.valid('header')['last-event-id']
      const events = log.stream(after, c.req.raw.signal)
      return streamSSE(c, async (stream) => {
        const alive = sseKeepAlive(stream, deps.limits?.sseKeepAliveMs)
        try {
          for await (const e of events) {
            await stream.writeSSE({ event: 'lifecycle', id: e.id, data: JSON.stringify(e) })
            alive.wrote()
          }
        } finally {
          alive.stop()
        }
      }) as never
    },
  )
}
