import { createRoute, z } from '@hono/zod-openapi'
import { AppError } from '../../errors.js'
import type { App } from '../app.js'
import type { AppDeps } from '../deps.js'
import { SandboxReplacementSchema } from '../../queue/schemas.js'
import { ErrorSchema, IdParam, PathQuery, SessionInputSchema, SessionSchema } from '../schemas.js'

const err = (description: string) => ({
  content: { 'application/json': { schema: ErrorSchema } },
  description,
})
const notFound = (id: string): AppError => new AppError('NOT_FOUND', `no session ${id}`)

/** `/v1/sessions` CRUD and file upload/download. */
export function registerSessionRoutes(app: App, deps: AppDeps): void {
  const fileLimit = deps.limits?.fileLimitBytes ?? 10_485_760

  app.openapi(
    createRoute({
      method: 'post',
      path: '/v1/sessions',
      summary: 'Open a sandbox session (its sandbox binds on the first command)',
      security: [{ bearer: [] }],
      request: { body: { content: { 'application/json': { schema: SessionInputSchema } }, required: false } },
      responses: {
        201: { content: { 'application/json': { schema: SessionSchema } }, description: 'the session' },
        400: err('bad input'),
        404: err('no such snapshot (with `snapshot`)'),
        409: err('a session with this id exists'),
        429: err('a new sandbox would pass a bound (quota)'),
        501: err('the provider has no snapshots (with `snapshot`)'),
      },
    }),
    async (c) => {
      const raw = await c.req.text()
      const body = raw.trim() ? safeJson(raw) : {}
      const parsed = SessionInputSchema.safeParse(body)
      if (!parsed.success) {
        const i = parsed.error.issues[0]
        throw new AppError(
          'BAD_REQUEST',
          `invalid request at "${i?.path.join('.') || '(body)'}": ${i?.message ?? 'invalid'}`,
        )
      }
      const { snapshot, ...input } = parsed.data
      if (snapshot !== undefined) {
        if (!deps.snapshots) throw new AppError('UNSUPPORTED', 'this server has no snapshots')
        // provider and profile default to the snapshot's, not to the schema's defaults.
        const given = body as { provider?: unknown; profile?: unknown }
        const s = await deps.snapshots.startSession(c.get('principal').tenant, {
          snapshot,
          ...(input.id ? { id: input.id } : {}),
          ...(given.provider !== undefined ? { provider: input.provider } : {}),
          ...(given.profile !== undefined ? { profile: input.profile } : {}),
        })
        return c.json(s, 201)
      }
      const s = await deps.sessions.create(c.get('principal').tenant, input, { admit: true })
      return c.json(s, 201)
    },
  )

  app.openapi(
    createRoute({
      method: 'get',
      path: '/v1/sessions',
      summary: "The tenant's sessions",
      security: [{ bearer: [] }],
      responses: {
        200: {
          content: { 'application/json': { schema: z.object({ sessions: z.array(SessionSchema) }) } },
          description: 'sessions',
        },
      },
    }),
    async (c) => c.json({ sessions: await deps.sessions.list(c.get('principal').tenant) }, 200),
  )

  app.openapi(
    createRoute({
      method: 'get',
      path: '/v1/sessions/{id}',
      summary: 'One session: its sandbox and whether that sandbox was replaced (files lost)',
      security: [{ bearer: [] }],
      request: { params: IdParam },
      responses: {
        200: { content: { 'application/json': { schema: SessionSchema } }, description: 'the session' },
        404: err('no such session'),
      },
    }),
    async (c) => {
      const { id } = c.req.valid('param')
      const s = await deps.sessions.get(c.get('principal').tenant, id)
      if (!s) throw notFound(id)
      return c.json(s, 200)
    },
  )

  app.openapi(
    createRoute({
      method: 'post',
      path: '/v1/sessions/{id}/ack',
      summary: "Acknowledge that the session's sandbox was replaced (clears `sandboxReplaced`)",
      description:
        'After a sandbox is lost (or idles out) the next call runs in a fresh, empty sandbox, and every result and view of the session carries `sandboxReplaced` until this call or a delete of the session.',
      security: [{ bearer: [] }],
      request: { params: IdParam },
      responses: {
        200: {
          content: { 'application/json': { schema: SessionSchema } },
          description: 'the session, without the notice',
        },
        404: err('no such session'),
      },
    }),
    async (c) => {
      const { id } = c.req.valid('param')
      const s = await deps.sessions.acknowledge(c.get('principal').tenant, id)
      if (!s) throw notFound(id)
      return c.json(s, 200)
    },
  )

  app.openapi(
    createRoute({
      method: 'delete',
      path: '/v1/sessions/{id}',
      summary: 'Close a session and destroy its sandboxes',
      security: [{ bearer: [] }],
      request: { params: IdParam },
      responses: {
        200: {
          content: { 'application/json': { schema: z.object({ deleted: z.literal(true) }) } },
          description: 'deleted',
        },
        404: err('no such session'),
      },
    }),
    async (c) => {
      const { id } = c.req.valid('param')
      if (!(await deps.sessions.delete(c.get('principal').tenant, id))) throw notFound(id)
      return c.json({ deleted: true as const }, 200)
    },
  )

  app.openapi(
    createRoute({
      method: 'put',
      path: '/v1/sessions/{id}/files',
      summary: 'Upload a file into the session sandbox (raw body)',
      security: [{ bearer: [] }],
      request: { params: IdParam, query: PathQuery },
      responses: {
        200: {
          content: {
            'application/json': {
              schema: z.object({
                path: z.string(),
                bytes: z.number(),
                sandboxReplaced: SandboxReplacementSchema.optional(),
              }),
            },
          },
          description: "written (with the session's `sandboxReplaced` notice while it stands)",
        },
        400: err('not a writable regular file (a FIFO, device or directory; read-only root)'),
        404: err('no such session'),
        413: err('file too large'),
        429: err('a new sandbox for the session would pass a bound (quota); Retry-After'),
        502: err("the session's sandbox was lost (the next call gets a fresh one)"),
        504: err('the sandbox did not answer in time'),
        507: err("the sandbox's disk is full (NO_SPACE): delete files, or raise diskMb / tmpMb"),
      },
    }),
    async (c) => {
      const { id } = c.req.valid('param')
      const { path } = c.req.valid('query')
      const declared = Number(c.req.header('content-length') ?? '0')
      if (declared > fileLimit) throw tooLarge(fileLimit)
      const data = new Uint8Array(await c.req.arrayBuffer())
      if (data.byteLength > fileLimit) throw tooLarge(fileLimit)
      const written = await deps.sessions.writeFile(c.get('principal').tenant, id, path, data)
      if (!written) throw notFound(id)
      return c.json({ path, bytes: data.byteLength, ...written }, 200)
    },
  )

  app.openapi(
    createRoute({
      method: 'get',
      path: '/v1/sessions/{id}/files',
      summary: 'Download a file from the session sandbox',
      security: [{ bearer: [] }],
      request: { params: IdParam, query: PathQuery },
      responses: {
        200: {
          content: { 'application/octet-stream': { schema: z.string().openapi({ format: 'binary' }) } },
          description: 'the file',
        },
        400: err('not a regular file (a FIFO, device or directory)'),
        404: err('no such session, or no such file (the message names the path)'),
        413: err('file larger than server.fileLimitBytes'),
        429: err('a new sandbox for the session would pass a bound (quota); Retry-After'),
        502: err("the session's sandbox was lost (the next call gets a fresh one)"),
        504: err('the sandbox did not answer in time'),
      },
    }),
    async (c) => {
      const { id } = c.req.valid('param')
      const { path } = c.req.valid('query')
      const data = await deps.sessions.readFile(c.get('principal').tenant, id, path)
      if (!data) throw notFound(id)
      if (data.byteLength > fileLimit) throw tooLarge(fileLimit)
      return c.body(data as Uint8Array<ArrayBuffer>, 200, {
        'content-type': 'application/octet-stream',
      }) as never
    },
  )
}

function tooLarge(limit: number): AppError {
  return new AppError('PAYLOAD_TOO_LARGE', `file over ${limit} bytes; raise server.fileLimitBytes`)
}

function safeJson(text: string): unknown {
  try {
    return JSON.parse(text)
  } catch {
    throw new AppError('BAD_REQUEST', 'request body is not valid JSON')
  }
}
