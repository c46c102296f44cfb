import { createRoute, z } from '@hono/zod-openapi'
import { AppError } from '../../errors.js'
import type { App } from '../app.js'
import type { ProcessService } from '../../services/index.js'
import type { AppDeps } from '../deps.js'
import {
  ProcessOutputQuery,
  ProcessOutputSchema,
  ProcessParams,
  ProcessSchema,
  ProcessSignalSchema,
  ProcessStartSchema,
  ProcessStdinSchema,
} from '../process-schemas.js'
import { ErrorSchema, IdParam } from '../schemas.js'

const err = (description: string) => ({
  content: { 'application/json': { schema: ErrorSchema } },
  description,
})
const json = <T extends z.ZodTypeAny>(schema: T, description: string) => ({
  content: { 'application/json': { schema } },
  description,
})
const common = {
  404: err('no such session (or not this key’s tenant), or no such process'),
  501: err("the session's provider has no background processes (UNSUPPORTED)"),
  502: err("the session's sandbox was lost"),
}
const base = '/v1/sessions/{id}/processes'

/** The answer, or 404 when the session is not the tenant's. */
function found<T>(id: string, value: T | undefined): T {
  if (value === undefined) throw new AppError('NOT_FOUND', `no session ${id}`)
  return value
}

/**
 * `/v1/sessions/{id}/processes`: background processes of a session's sandbox (start, list, one,
 * output from offsets, stdin, signal, delete).
 */
export function registerProcessRoutes(app: App, deps: AppDeps): void {
  const service = (): ProcessService => {
    if (!deps.processes) throw new AppError('UNSUPPORTED', 'this server has no background processes')
    return deps.processes
  }
  const tenant = (c: { get(k: 'principal'): { tenant: string } }): string => c.get('principal').tenant

  app.openapi(
    createRoute({
      method: 'post',
      path: base,
      summary: 'Start a background process in the session sandbox',
      description:
        'Runs `command` with `bash -c` as the leader of its own process group, detached from the call: it runs ' +
        'until it exits, is signalled, or the session (its sandbox) ends. Its stdout and stderr are kept in a ' +
        'buffer per stream of `quotas.processOutputBytes` that drops the oldest bytes. At most ' +
        '`quotas.maxProcessesPerSession` run at once per session (429 past it).',
      security: [{ bearer: [] }],
      request: {
        params: IdParam,
        body: { content: { 'application/json': { schema: ProcessStartSchema } }, required: true },
      },
      responses: {
        201: json(ProcessSchema, 'started'),
        400: err('bad input'),
        429: err('quotas.maxProcessesPerSession processes run already, or a new sandbox would pass a quota'),
        ...common,
      },
    }),
    async (c) => {
      const { id } = c.req.valid('param')
      const p = found(id, await service().start(tenant(c), id, c.req.valid('json')))
      return c.json(p, 201, { location: `/v1/sessions/${id}/processes/${p.id}` })
    },
  )

  app.openapi(
    createRoute({
      method: 'get',
      path: base,
      summary: "The session's background processes (running and ended, oldest first)",
      security: [{ bearer: [] }],
      request: { params: IdParam },
      responses: { 200: json(z.object({ processes: z.array(ProcessSchema) }), 'processes'), ...common },
    }),
    async (c) => {
      const { id } = c.req.valid('param')
      return c.json({ processes: found(id, await service().list(tenant(c), id)) }, 200)
    },
  )

  app.openapi(
    createRoute({
      method: 'get',
      path: `${base}/{processId}`,
      summary: 'One background process',
      security: [{ bearer: [] }],
      request: { params: ProcessParams },
      responses: { 200: json(ProcessSchema, 'the process'), ...common },
    }),
    async (c) => {
      const { id, processId } = c.req.valid('param')
      return c.json(found(id, await service().get(tenant(c), id, processId)), 200)
    },
  )

  app.openapi(
    createRoute({
      method: 'get',
      path: `${base}/{processId}/output`,
      summary: "A process's stdout and stderr from offsets",
      description:
        'Offsets count every byte a stream ever carried. Each stream answers from its offset (clamped to what ' +
        'the buffer still holds) up to `maxBytes`, with `nextOffset` to pass next time and `dropped`: how many ' +
        'bytes after the offset asked for were dropped by the capped buffer before the first one returned.',
      security: [{ bearer: [] }],
      request: { params: ProcessParams, query: ProcessOutputQuery },
      responses: {
        200: json(ProcessOutputSchema, 'the process and a slice of each stream'),
        400: err('bad offset'),
        ...common,
      },
    }),
    async (c) => {
      const { id, processId } = c.req.valid('param')
      const q = c.req.valid('query')
      const from = {
        stdoutOffset: q.stdoutOffset ?? q.offset ?? 0,
        stderrOffset: q.stderrOffset ?? q.offset ?? 0,
        maxBytes: q.maxBytes,
        waitMs: q.waitMs,
      }
      return c.json(found(id, await service().read(tenant(c), id, processId, from)), 200)
    },
  )

  app.openapi(
    createRoute({
      method: 'post',
      path: `${base}/{processId}/stdin`,
      summary: "Write to a process's stdin (and optionally close it)",
      security: [{ bearer: [] }],
      request: {
        params: ProcessParams,
        body: { content: { 'application/json': { schema: ProcessStdinSchema } }, required: true },
      },
      responses: {
        200: json(z.object({ written: z.number().int(), process: ProcessSchema }), 'written'),
        400: err('bad input'),
        409: err('the process ended, or its stdin is closed'),
        504: err('the process does not read its stdin (5 s without progress)'),
        ...common,
      },
    }),
    async (c) => {
      const { id, processId } = c.req.valid('param')
      const { data, close } = c.req.valid('json')
      const r = await service().writeStdin(tenant(c), id, processId, new TextEncoder().encode(data), close)
      return c.json(found(id, r), 200)
    },
  )

  app.openapi(
    createRoute({
      method: 'post',
      path: `${base}/{processId}/signal`,
      summary: "Send a signal to a process's whole process group",
      security: [{ bearer: [] }],
      request: {
        params: ProcessParams,
        body: { content: { 'application/json': { schema: ProcessSignalSchema } }, required: false },
      },
      responses: {
        200: json(ProcessSchema, 'signalled: the process after up to waitMs'),
        400: err('unknown signal'),
        409: err('nothing of the process group runs any more'),
        ...common,
      },
    }),
    async (c) => {
      const { id, processId } = c.req.valid('param')
      const raw = await c.req.text()
      const parsed = ProcessSignalSchema.safeParse(raw.trim() ? parseJson(raw) : {})
      if (!parsed.success) {
        const i = parsed.error.issues[0]
        throw new AppError(
          'BAD_REQUEST',
          `invalid request at "${i?.path.join('.') || '(body)'}": ${i?.message ?? 'invalid'}`,
        )
      }
      const { signal, waitMs } = parsed.data
      return c.json(found(id, await service().signal(tenant(c), id, processId, signal, waitMs)), 200)
    },
  )

  app.openapi(
    createRoute({
      method: 'delete',
      path: `${base}/{processId}`,
      summary: 'Kill a process (SIGKILL to its group, if it runs) and forget it and its output',
      security: [{ bearer: [] }],
      request: { params: ProcessParams },
      responses: { 200: json(ProcessSchema, 'the process as it ended'), ...common },
    }),
    async (c) => {
      const { id, processId } = c.req.valid('param')
      return c.json(found(id, await service().remove(tenant(c), id, processId)), 200)
    },
  )
}

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text)
  } catch {
    throw new AppError('BAD_REQUEST', 'request body is not valid JSON')
  }
}
