import { randomBytes } from 'node:crypto'
import { createBullBoard } from '@bull-board/api'
import { BullMQAdapter } from '@bull-board/api/bullMQAdapter'
import { HonoAdapter } from '@bull-board/hono'
import { serveStatic } from '@hono/node-server/serve-static'
import { Queue } from 'bullmq'
import type { Context, MiddlewareHandler } from 'hono'
import { getCookie, setCookie } from 'hono/cookie'
import { AppError } from '../errors.js'
import type { Logger } from '../logger.js'
import { localDashboardFonts, registerDashboardFonts } from './local-assets.js'
import { connectRedis, createRedisClient, QUEUE_NAMES, quitRedis } from '../redis/index.js'
import type { App, HttpEnv } from './app.js'
import { hashKey } from './keyring.js'
import type { Keyring, Principal } from './keyring.js'

/** The cookie that carries a dashboard session token (never the API key itself). */
export const ADMIN_SESSION_COOKIE = 'sbx_admin_session'

/** Options of {@link registerAdminRoutes}. */
export interface AdminRoutesOptions {
  /** The API's keyring: only principals with `admin: true` may open the dashboard. */
  keyring: Keyring
  /** BullMQ queues to show (see {@link openDashboardQueues}). */
  queues: readonly Queue[]
  /** Where the dashboard is mounted. @default '/admin/queues' */
  basePath?: string
  /** Lifetime of a dashboard session started with `?key=` (ms). @default 3600000 */
  sessionTtlMs?: number
  /** Sessions held at once; past this the oldest is dropped. @default 1000 */
  maxSessions?: number
  /** Hide retry/clean/pause/remove in the UI and refuse them in its API (405). @default true */
  readOnly?: boolean
  /** `auto`: mark the cookie `Secure` when the request came over https (URL or X-Forwarded-Proto). @default 'auto' */
  secureCookie?: boolean | 'auto'
  /** Warns about rejected keys (never logs the key). */
  logger?: Logger
  /** Clock (epoch ms), for tests. @default Date.now */
  now?: () => number
}

/**
 * Mounts the Bull Board queue dashboard at `basePath`, behind the bearer keyring (admin keys only:
 * 401 without a key or with an unknown one, 403 for a non-admin key).
 *
 * Browsers cannot attach a bearer header to page loads, so the dashboard's pages also take the key
 * once as `?key=`: the key is checked, an opaque random session token goes into an HttpOnly,
 * SameSite=Strict cookie scoped to `basePath`, and the browser is redirected (303) to the same URL
 * without the key, so it does not stay in the address bar or history. Only the token's sha256 is
 * kept, in this process's memory: sessions end after `sessionTtlMs` or a restart, and each API
 * replica holds its own (open the `?key=` URL again on another replica).
 */
export function registerAdminRoutes(app: App, opts: AdminRoutesOptions): void {
  const basePath = (opts.basePath ?? '/admin/queues').replace(/\/+$/, '')
  if (!/^\/[A-Za-z0-9/_-]+$/.test(basePath))
    throw new AppError('CONFIG_INVALID', `admin basePath "${basePath}" must look like /admin/queues`)
  const now = opts.now ?? Date.now
  const ttlMs = opts.sessionTtlMs ?? 3_600_000
  const sessions = new DashboardSessions(ttlMs, opts.maxSessions ?? 1000, now)
  const readOnlyMode = opts.readOnly ?? true

  const requireAdmin = (c: Context<HttpEnv>, presented: string): Principal => {
    const principal = opts.keyring.verify(presented)
    if (!principal) {
      opts.logger?.warn(
        { path: c.req.path, requestId: c.get('requestId') },
        'dashboard: rejected an unknown API key',
      )
      throw new AppError('UNAUTHORIZED', 'unknown API key')
    }
    if (!principal.admin)
      throw new AppError(
        'FORBIDDEN',
        `key ${principal.keyId} (tenant "${principal.tenant}") is not an admin key; the queue dashboard needs a key with "admin": true`,
      )
    return principal
  }
  // Pages (not the JSON API, not assets) are what a person opens: only they take `?key=`.
  const isPage = (path: string): boolean =>
    !path.startsWith(`${basePath}/api/`) && !path.startsWith(`${basePath}/static/`)

  const guard: MiddlewareHandler<HttpEnv> = async function adminGuard(c, next) {
    const bearer = /^Bearer\s+(\S+)\s*$/i.exec(c.req.header('authorization') ?? '')?.[1]
    const queryKey = c.req.query('key')
    let principal: Principal | undefined
    if (bearer !== undefined) {
      principal = requireAdmin(c, bearer)
    } else if (queryKey !== undefined && c.req.method === 'GET' && isPage(c.req.path)) {
      principal = requireAdmin(c, queryKey)
      const secure =
        opts.secureCookie === 'auto' || opts.secureCookie === undefined
          ? new URL(c.req.url).protocol === 'https:' || c.req.header('x-forwarded-proto') === 'https'
          : opts.secureCookie
      setCookie(c, ADMIN_SESSION_COOKIE, sessions.create(principal), {
        path: basePath,
        httpOnly: true,
        sameSite: 'Strict',
        secure,
        maxAge: Math.floor(ttlMs / 1000),
      })
      const url = new URL(c.req.url)
      url.searchParams.delete('key')
      c.header('Referrer-Policy', 'no-referrer')
      c.header('Cache-Control', 'no-store')
      return c.redirect(`${url.pathname}${url.search}`, 303)
    } else {
      const token = getCookie(c, ADMIN_SESSION_COOKIE)
      if (token === undefined)
        throw new AppError(
          'UNAUTHORIZED',
          `the queue dashboard needs an admin key: open ${basePath}?key=<admin key> once in a browser, or send "Authorization: Bearer <admin key>"`,
        )
      principal = sessions.verify(token)
      if (!principal)
        throw new AppError(
          'UNAUTHORIZED',
          `dashboard session expired or unknown; open ${basePath}?key=<admin key> again`,
        )
    }
    c.set('principal', principal)
    await next()
    c.res.headers.set('Referrer-Policy', 'no-referrer')
    c.res.headers.set('X-Frame-Options', 'DENY')
    c.res.headers.set('X-Content-Type-Options', 'nosniff')
    if (!c.req.path.startsWith(`${basePath}/static/`)) c.res.headers.set('Cache-Control', 'no-store')
  }

  const serverAdapter = new HonoAdapter(serveStatic).setBasePath(basePath)
  createBullBoard({
    queues: opts.queues.map((q) => {
      const adapter = new BullMQAdapter(q, { readOnlyMode, allowRetries: !readOnlyMode })
      adapter.setFormatter('data', redactJobData)
      return adapter
    }),
    serverAdapter,
    options: { uiConfig: { boardTitle: 'sandbox-router queues' } },
  })
  // `${basePath}/*` also matches `basePath` itself (Hono), so one guard covers every dashboard path.
  app.use(`${basePath}/*`, guard)
  app.use(`${basePath}/*`, localDashboardFonts(basePath))
  app.get(`${basePath}/`, (c) => c.redirect(basePath, 308))
  registerDashboardFonts(app, basePath)
  app.route(basePath, serverAdapter.registerPlugin())
}

/**
 * Exec job data as the dashboard shows it: `env` values and `stdin` are hidden (they may carry a
 * tenant's secrets); everything else is shown as queued.
 */
export function redactJobData(data: unknown): unknown {
  if (!data || typeof data !== 'object' || Array.isArray(data)) return data
  const out: Record<string, unknown> = { ...(data as Record<string, unknown>) }
  const env = out['env']
  if (env && typeof env === 'object') out['env'] = Object.fromEntries(Object.keys(env).map((k) => [k, '***']))
  const stdin = out['stdin']
  if (typeof stdin === 'string') out['stdin'] = `(${Buffer.byteLength(stdin)} bytes hidden)`
  return out
}

/** Opaque dashboard sessions, kept by the sha256 of their token; insertion order is expiry order. */
class DashboardSessions {
  private readonly byHash = new Map<string, { principal: Principal; expiresAt: number }>()

  constructor(
    private readonly ttlMs: number,
    private readonly max: number,
    private readonly now: () => number,
  ) {}

  create(principal: Principal): string {
    const t = this.now()
    for (const [hash, s] of this.byHash) {
      if (s.expiresAt > t && this.byHash.size < this.max) break
      this.byHash.delete(hash)
    }
    const token = randomBytes(32).toString('base64url')
    this.byHash.set(hashKey(token), { principal, expiresAt: t + this.ttlMs })
    return token
  }

  verify(token: string): Principal | undefined {
    const hash = hashKey(token)
    const s = this.byHash.get(hash)
    if (!s) return undefined
    if (s.expiresAt <= this.now()) {
      this.byHash.delete(hash)
      return undefined
    }
    return s.principal
  }
}

/** The fleet's BullMQ queues under the `bullmq` driver: routed commands, and agent runs (`sbx worker --agent`). */
export const DASHBOARD_QUEUE_NAMES: readonly string[] = [QUEUE_NAMES.exec, QUEUE_NAMES.agentRuns]

/** Queue handles for the dashboard and how to release them. */
export interface DashboardQueues {
  readonly queues: readonly Queue[]
  /** Closes the handles, then their Redis connection. */
  close(): Promise<void>
}

/** Options of {@link openDashboardQueues}. */
export interface DashboardQueuesOptions {
  /** The fleet's Redis (config `queue.redisUrl`). */
  redisUrl: string
  /** BullMQ key prefix (config `queue.prefix`). @default 'sbx' */
  prefix?: string
  /** Queues to show. @default DASHBOARD_QUEUE_NAMES (sbx-exec, sbx-agent-runs) */
  queueNames?: readonly string[]
  /** Give up connecting after this long (ms). @default 5000 */
  connectTimeoutMs?: number
  /** Connection errors after startup (BullMQ emits them as events). @default ignored */
  onError?: (err: Error) => void
}

/**
 * Opens the dashboard's own BullMQ `Queue` handles (fleet mode only) over one fail-fast Redis
 * connection; they only read unless the board is built with `readOnly: false`. Rejects with
 * QUEUE_UNAVAILABLE when Redis does not answer.
 */
export async function openDashboardQueues(opts: DashboardQueuesOptions): Promise<DashboardQueues> {
  const client = createRedisClient(opts.redisUrl, 'command', 'sbx-dashboard')
  await connectRedis(client, opts.redisUrl, opts.connectTimeoutMs ?? 5_000)
  const onError = opts.onError ?? (() => undefined)
  const queues = (opts.queueNames ?? DASHBOARD_QUEUE_NAMES).map((name) => {
    const q = new Queue(name, { connection: client, prefix: opts.prefix ?? 'sbx' })
    q.on('error', onError)
    return q
  })
  return {
    queues,
    async close() {
      await Promise.allSettled(queues.map((q) => q.close()))
      await quitRedis(client)
    },
  }
}
