import { createRoute, z } from '@hono/zod-openapi'
import { AppError } from '../../errors.js'
import type { App } from '../app.js'
import type { SnapshotService } from '../../services/index.js'
import type { AppDeps } from '../deps.js'
import { ErrorSchema, IdParam, SessionSchema } from '../schemas.js'

const err = (description: string) => ({
  content: { 'application/json': { schema: ErrorSchema } },
  description,
})
const json = <T extends z.ZodTypeAny>(schema: T, description: string) => ({
  content: { 'application/json': { schema } },
  description,
})

/** A snapshot as every route shows it. */
export const SnapshotSchema = z
  .object({
    id: z.string(),
    provider: z.string(),
    profile: z.string(),
    /** The session it was taken from. */
    sessionId: z.string(),
    createdAt: z.number(),
    state: z.enum(['creating', 'ready', 'failed']),
    reason: z.string().optional(),
    /** Bytes of the captured workspace. */
    workspaceBytes: z.number(),
    /** The name it was given (E2B's `createSnapshot({ name })`). */
    name: z.string().optional(),
  })
  .openapi('Snapshot')

/** Body of `POST /v1/sessions/{id}/fork`. */
export const ForkInputSchema = z
  .object({
    /** New sessions to make, each with its own copy of the workspace. @default 1 */
    count: z.number().int().min(1).max(32).default(1),
    /** Keep (and return) the snapshot the forks come from; it counts against quotas.maxSnapshots. @default false */
    keepSnapshot: z.boolean().default(false),
  })
  .strict()
  .openapi('ForkInput')

const ForkResultSchema = z
  .object({ sessions: z.array(SessionSchema), snapshot: SnapshotSchema.optional() })
  .openapi('ForkResult')

const sessionMissing = (id: string) => new AppError('NOT_FOUND', `no session ${id}`)
const snapshotMissing = (id: string) =>
  new AppError('NOT_FOUND', `no snapshot ${id}; list them with GET /v1/snapshots`)

/** Errors shared by the routes that take a snapshot. */
const capturing = {
  400: err("the session's profile has no persistent workspace (workspace: { persistent: true })"),
  404: err('no such session (or not this key’s tenant)'),
  429: err(
    'the tenant holds quotas.maxSnapshots snapshots (QUOTA_EXCEEDED), or a new sandbox would pass a bound',
  ),
  501: err("the session's provider has no snapshots (UNSUPPORTED); GET /v1/providers says which do"),
  507: err('the workspace is over its bound, workspace.sizeMb (NO_SPACE)'),
}

/**
 * Snapshots and forks: `POST /v1/sessions/{id}/snapshots`, `GET /v1/snapshots`,
 * `GET|DELETE /v1/snapshots/{id}`, `POST /v1/sessions/{id}/fork`. A session starts from a snapshot
 * with `POST /v1/sessions {snapshot}` (routes/sessions.ts).
 */
export function registerSnapshotRoutes(app: App, deps: AppDeps): void {
  const service = (): SnapshotService => {
    if (!deps.snapshots) throw new AppError('UNSUPPORTED', 'this server has no snapshots')
    return deps.snapshots
  }
  const tenant = (c: { get(k: 'principal'): { tenant: string } }): string => c.get('principal').tenant

  app.openapi(
    createRoute({
      method: 'post',
      path: '/v1/sessions/{id}/snapshots',
      summary: "Snapshot the session's sandbox: its filesystem changes and its persistent workspace",
      security: [{ bearer: [] }],
      request: { params: IdParam },
      responses: { 201: json(SnapshotSchema, 'the snapshot, ready'), ...capturing },
    }),
    async (c) => {
      const { id } = c.req.valid('param')
      const s = await service().create(tenant(c), id)
      if (!s) throw sessionMissing(id)
      return c.json(s, 201)
    },
  )

  app.openapi(
    createRoute({
      method: 'post',
      path: '/v1/sessions/{id}/fork',
      summary: 'Snapshot the session and start `count` new sessions from it, in one call',
      security: [{ bearer: [] }],
      request: {
        params: IdParam,
        body: { content: { 'application/json': { schema: ForkInputSchema } }, required: false },
      },
      responses: { 201: json(ForkResultSchema, 'the new sessions'), ...capturing },
    }),
    async (c) => {
      const { id } = c.req.valid('param')
      const text = await c.req.text()
      const parsed = ForkInputSchema.safeParse(text.trim() ? parseJson(text) : {})
      if (!parsed.success) {
        const i = parsed.error.issues[0]
        throw new AppError(
          'BAD_REQUEST',
          `invalid fork request at "${i?.path.join('.') || '(body)'}": ${i?.message ?? 'invalid'}`,
        )
      }
      const r = await service().fork(tenant(c), id, parsed.data)
      if (!r) throw sessionMissing(id)
      return c.json(r, 201)
    },
  )

  app.openapi(
    createRoute({
      method: 'get',
      path: '/v1/snapshots',
      summary: "The tenant's snapshots",
      security: [{ bearer: [] }],
      responses: { 200: json(z.object({ snapshots: z.array(SnapshotSchema) }), 'snapshots') },
    }),
    async (c) => c.json({ snapshots: await service().list(tenant(c)) }, 200),
  )

  app.openapi(
    createRoute({
      method: 'get',
      path: '/v1/snapshots/{id}',
      summary: 'One snapshot',
      security: [{ bearer: [] }],
      request: { params: IdParam },
      responses: { 200: json(SnapshotSchema, 'the snapshot'), 404: err('no such snapshot') },
    }),
    async (c) => {
      const { id } = c.req.valid('param')
      const s = await service().get(tenant(c), id)
      if (!s) throw snapshotMissing(id)
      return c.json(s, 200)
    },
  )

  app.openapi(
    createRoute({
      method: 'delete',
      path: '/v1/snapshots/{id}',
      summary: 'Delete a snapshot (sessions started from it keep their copies)',
      security: [{ bearer: [] }],
      request: { params: IdParam },
      responses: {
        200: json(z.object({ deleted: z.literal(true) }), 'deleted'),
        404: err('no such snapshot'),
      },
    }),
    async (c) => {
      const { id } = c.req.valid('param')
      if (!(await service().delete(tenant(c), id))) throw snapshotMissing(id)
      return c.json({ deleted: true as const }, 200)
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
