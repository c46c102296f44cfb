/**
 * E2B's snapshots and forks over our snapshot service (docs/workspaces.md): `createSnapshot`
 * (`POST /sandboxes/{id}/snapshots`), `listSnapshots` (`GET /snapshots`), `deleteSnapshot`
 * (`DELETE /templates/{id}`), `fork` (`POST /sandboxes/{id}/fork`), and `Sandbox.create(<snapshot
 * id or name>)` (snapshot-template.ts, called by the create route). A snapshot is the
 * tenant's record in the same store as `/v1/snapshots`; an E2B sandbox (no persistent workspace)
 * is captured with the files of its in-memory mounts (its home, /tmp), which its copies get.
 */
import type { Context } from 'hono'
import type { App } from '../app.js'
import type { Principal } from '../keyring.js'
import type { SnapshotService, SnapshotView } from '../../services/index.js'
import { bareName, findSnapshot } from './snapshot-template.js'
import { jsonBody, principalOf, sandboxJson, timeoutSeconds } from './control-plane.js'
import type { E2BRouteDeps } from './deps.js'
import { E2BApiError, e2bErrorResponse } from './errors.js'
import { sandboxDomain } from './hosts.js'
import { E2BSandboxStore, type E2BSandbox } from './sandboxes.js'

/** E2B's default lifetime of a fork (s): `SandboxForkRequest.timeout`. */
const FORK_TIMEOUT_S = 15
/** E2B's bound on `count` of one fork call. */
const MAX_FORKS = 100
/** Names a snapshot may be given: they are also the template name `Sandbox.create` takes. */
const NAME = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}$/

/** E2B's `SnapshotInfo`. */
const infoJson = (s: SnapshotView) => ({ snapshotID: s.id, names: s.name ? [s.name] : [] })

function service(deps: E2BRouteDeps): SnapshotService {
  if (!deps.snapshots)
    throw new E2BApiError(501, 'snapshots are not supported by this server (it has no snapshot service)')
  return deps.snapshots
}

/** Registers the snapshot and fork routes; `store` holds the E2B side of the sandboxes. */
export function registerE2BSnapshotRoutes(app: App, deps: E2BRouteDeps, store: E2BSandboxStore): void {
  const handle =
    (fn: (c: Context, p: Principal) => Promise<Response>) =>
    async (c: Context): Promise<Response> => {
      try {
        return await fn(c, await principalOf(c, deps))
      } catch (err) {
        return e2bErrorResponse(err)
      }
    }
  const own = async (p: Principal, id: string): Promise<E2BSandbox> => {
    const s = await store.get(p.tenant, id)
    if (!s) throw new E2BApiError(404, `sandbox "${id}" doesn't exist or you don't have access to it`)
    // A frozen sandbox cannot be read out (its files are read by a process in it).
    if (s.paused)
      throw new E2BApiError(
        409,
        `sandbox ${id} is paused; resume it (connect) before snapshotting or forking it`,
      )
    return s
  }

  const snapshot = handle(async (c, p) => {
    const body = await jsonBody(c)
    const name = body.name
    if (name !== undefined && name !== null && (typeof name !== 'string' || !NAME.test(name)))
      throw new E2BApiError(
        400,
        `name must be 1-100 letters, digits, '_', '.' or '-', starting with a letter or digit (got ${JSON.stringify(name)})`,
      )
    const snapshots = service(deps)
    const s = await own(p, c.req.param('id') ?? '')
    if (typeof name === 'string') {
      if (deps.e2b.templates[name] !== undefined)
        throw new E2BApiError(
          400,
          `name '${name}' is a template of this server (e2b.templates); pick another`,
        )
      if ((await snapshots.list(p.tenant)).some((x) => x.name === name))
        throw new E2BApiError(409, `a snapshot named '${name}' exists; delete it first or pick another name`)
    }
    const snap = await snapshots.create(p.tenant, s.sandboxId, {
      tmpfs: true,
      ...(typeof name === 'string' ? { name } : {}),
    })
    if (!snap)
      throw new E2BApiError(404, `sandbox "${s.sandboxId}" doesn't exist or you don't have access to it`)
    deps.logger.info(
      { tenant: p.tenant, sandboxId: s.sandboxId, snapshotId: snap.id },
      'e2b snapshot created',
    )
    return c.json(infoJson(snap), 201)
  })
  app.post('/sandboxes/:id/snapshots', snapshot)

  app.get(
    '/snapshots',
    handle(async (c, p) => {
      const sandboxId = c.req.query('sandboxID')
      const name = c.req.query('name')
      const limitRaw = c.req.query('limit')
      const limit = limitRaw === undefined ? 100 : Number(limitRaw)
      if (!Number.isInteger(limit) || limit < 1 || limit > 100)
        throw new E2BApiError(400, 'limit must be an integer from 1 to 100')
      const token = c.req.query('nextToken')
      const offset = token === undefined || token === '' ? 0 : Number(token)
      if (!Number.isInteger(offset) || offset < 0)
        throw new E2BApiError(400, 'nextToken is not one this server gave out; list again without it')
      const wanted = name ? bareName(name) : undefined
      const matching = (await service(deps).list(p.tenant))
        .filter((s) => sandboxId === undefined || s.sessionId === sandboxId)
        .filter((s) => wanted === undefined || s.name === wanted || s.id === name)
        .sort((a, b) => b.createdAt - a.createdAt)
      if (offset + limit < matching.length) c.header('x-next-token', String(offset + limit))
      return c.json(matching.slice(offset, offset + limit).map(infoJson))
    }),
  )

  app.delete(
    '/templates/:id',
    handle(async (c, p) => {
      const ref = c.req.param('id') ?? ''
      const snapshots = service(deps)
      const snap = await findSnapshot(snapshots, p.tenant, ref)
      if (!snap) {
        if (deps.e2b.templates[ref] !== undefined)
          throw new E2BApiError(
            400,
            `template '${ref}' is configured (e2b.templates) and cannot be deleted through the API`,
          )
        throw new E2BApiError(404, `template or snapshot '${ref}' not found`)
      }
      if (!(await snapshots.delete(p.tenant, snap.id)))
        throw new E2BApiError(404, `snapshot '${ref}' not found`)
      deps.logger.info({ tenant: p.tenant, snapshotId: snap.id }, 'e2b snapshot deleted')
      return c.body(null, 204)
    }),
  )

  app.post(
    '/sandboxes/:id/fork',
    handle(async (c, p) => {
      const body = await jsonBody(c)
      const count = body.count ?? 1
      if (typeof count !== 'number' || !Number.isInteger(count) || count < 1 || count > MAX_FORKS)
        throw new E2BApiError(
          400,
          `count must be an integer from 1 to ${MAX_FORKS} (got ${JSON.stringify(body.count)})`,
        )
      const ms = timeoutSeconds(body.timeout, FORK_TIMEOUT_S) * 1000
      const snapshots = service(deps)
      const source = await own(p, c.req.param('id') ?? '')
      // One capture for every fork; it is not kept (E2B's fork leaves no snapshot behind).
      const snap = await snapshots.create(p.tenant, source.sandboxId, { tmpfs: true })
      if (!snap)
        throw new E2BApiError(
          404,
          `sandbox "${source.sandboxId}" doesn't exist or you don't have access to it`,
        )
      const domain = sandboxDomain(deps.e2b.domain, c.req.header('host'))
      try {
        // Each fork succeeds or fails on its own, as E2B reports them.
        const results = await Promise.allSettled(
          Array.from({ length: count }, async () => {
            const sandboxId = E2BSandboxStore.newId()
            await snapshots.startSession(p.tenant, { id: sandboxId, snapshot: snap.id })
            const {
              sandboxId: _id,
              accessToken: _a,
              trafficAccessToken,
              paused: _p,
              pausedSandbox: _ps,
              startedAt: _s,
              endAt: _e,
              ...inherited
            } = source
            return store.add(sandboxId, { ...inherited, publicTraffic: trafficAccessToken === undefined }, ms)
          }),
        )
        deps.logger.info(
          {
            tenant: p.tenant,
            sandboxId: source.sandboxId,
            count,
            ok: results.filter((r) => r.status === 'fulfilled').length,
          },
          'e2b sandbox forked',
        )
        return c.json(
          results.map((r) =>
            r.status === 'fulfilled'
              ? { sandbox: sandboxJson(r.value, domain) }
              : { error: forkError(r.reason) },
          ),
          201,
        )
      } finally {
        await snapshots
          .delete(p.tenant, snap.id)
          .catch((err: unknown) =>
            deps.logger.warn({ err, snapshotId: snap.id }, 'could not delete the snapshot of a fork'),
          )
      }
    }),
  )
}

/** One failed fork as E2B's `Error`: the status its error would have had, and its message. */
function forkError(err: unknown): { code: number; message: string } {
  const res = e2bErrorResponse(err)
  return { code: res.status, message: err instanceof Error ? err.message : String(err) }
}
