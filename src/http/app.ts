import { OpenAPIHono } from '@hono/zod-openapi'
import { Scalar } from '@scalar/hono-api-reference'
import { isUtf8 } from 'node:buffer'
import { HTTPException } from 'hono/http-exception'
import type { MiddlewareHandler } from 'hono'
import { AppError } from '../errors.js'
import { isRedisUnreachable } from '../redis/index.js'
import type { AppDeps } from './deps.js'
import { limitBody as limitBodyTo } from './body-limit.js'
import { toErrorResponse } from './errors.js'
import type { Principal } from './keyring.js'
import { RateLimiter, type RequestLimiter } from '../services/rate-limit.js'
import { keyFromProtocols } from './ws-protocols.js'
import { registerAdminRoutes } from './admin.js'
import { DOCS_SCRIPT_PATH, registerDocsScript } from './local-assets.js'
import { registerAgentRunRoutes } from './routes/agent-runs.js'
import { registerE2BRoutes } from './e2b/index.js'
import { registerEventRoutes } from './routes/events.js'
import { registerExecRoutes } from './routes/exec.js'
import { registerPortRoutes } from './routes/ports.js'
import { registerTerminalRoutes } from './routes/terminal.js'
import { registerCodeRoutes } from './routes/code.js'
import { registerProcessRoutes } from './routes/processes.js'
import { registerSessionRoutes } from './routes/sessions.js'
import { registerSnapshotRoutes } from './routes/snapshots.js'
import { registerSystemRoutes } from './routes/system.js'

/** Hono environment: the authenticated principal and a request id. */
export type HttpEnv = { Variables: { principal: Principal; requestId: string } }

/** The OpenAPI-aware Hono app type every route module registers on. */
export type App = OpenAPIHono<HttpEnv>

/**
 * Builds the HTTP API. Pure: no env reads, no `listen()` — the composition root passes `deps` and
 * serves the returned app (`app.fetch`).
 */
export function createApp(deps: AppDeps): App {
  const app: App = new OpenAPIHono<HttpEnv>({
    defaultHook: (result) => {
      if (!result.success) {
        const issue = result.error.issues[0]
        const field = issue?.path.map(String).join('.') || '(body)'
        throw new AppError(
          'BAD_REQUEST',
          `invalid request at "${field}": ${issue?.message ?? 'invalid value'}`,
        )
      }
    },
  })
  const limiter: RequestLimiter = deps.requestLimiter ?? new RateLimiter(deps.limits?.requestsPerSecond ?? 50)
  const bodyLimitBytes = deps.limits?.bodyLimitBytes ?? 1_048_576

  app.onError((err, c) => {
    if (err instanceof HTTPException && !(err.cause instanceof AppError)) {
      const code =
        err.status === 413 ? 'PAYLOAD_TOO_LARGE' : err.status === 401 ? 'UNAUTHORIZED' : 'BAD_REQUEST'
      return c.json({ error: { code, message: err.message || 'bad request' } }, err.status)
    }
    // A store that let a Redis connection error through (session directory, agent runs): the service
    // is unavailable, not broken — 503 with a reason, as the queue's own errors are.
    const { status, body } = toErrorResponse(
      !(err instanceof AppError) && isRedisUnreachable(err)
        ? new AppError(
            'QUEUE_UNAVAILABLE',
            'Redis (queue and session store) is unreachable; retry once it is back',
            { retryable: true, cause: err },
          )
        : err,
    )
    if (status >= 500)
      deps.logger.error({ err, path: c.req.path, requestId: c.get('requestId') }, 'request failed')
    if (status === 404) {
      // Another tenant's session, job, run or MCP session answers exactly like an unknown one; the
      // refusal is logged with the caller's tenant, so cross-tenant probing shows in the log.
      const principal = c.get('principal') as Principal | undefined
      deps.logger.info(
        {
          tenant: principal?.tenant,
          method: c.req.method,
          route: c.req.routePath,
          path: c.req.path,
          status,
          code: body.error.code,
          requestId: c.get('requestId'),
        },
        'not found for this tenant',
      )
    }
    // RFC 6750: say the scheme is a plain bearer key, so MCP clients report the error instead of
    // starting an OAuth discovery.
    if (status === 401)
      c.header(
        'WWW-Authenticate',
        `Bearer realm="sandbox-router"${err instanceof InvalidKeyError ? ', error="invalid_token"' : ''}`,
      )
    if (err instanceof RateLimitedError) c.header('Retry-After', String(err.retryAfterS))
    else if (status === 429) c.header('Retry-After', '1')
    else if (body.error.code === 'QUEUE_UNAVAILABLE') c.header('Retry-After', '2')
    return c.json(body, status)
  })
  app.notFound((c) =>
    c.json({ error: { code: 'NOT_FOUND', message: `no route ${c.req.method} ${c.req.path}` } }, 404),
  )

  app.use('*', async (c, next) => {
    c.set('requestId', c.req.header('x-request-id') ?? crypto.randomUUID())
    await next()
  })
  // E2B sandbox host names (`<port>-<sandboxId>.<domain>`, the SDK's getHost): the sandbox's server
  // answers, before any key or body limit of ours. Set below, once the E2B routes exist.
  let e2bHosts: MiddlewareHandler<HttpEnv> | undefined
  app.use('*', (c, next) => (e2bHosts ? e2bHosts(c, next) : next()))

  const fileLimitBytes = deps.limits?.fileLimitBytes ?? 10_485_760
  const limitBody = (maxSize: number, what: string) =>
    limitBodyTo<HttpEnv>(maxSize, () => {
      throw new AppError(
        'PAYLOAD_TOO_LARGE',
        `${what} over ${maxSize} bytes; send less or raise server.${what === 'file' ? 'fileLimitBytes' : 'bodyLimitBytes'}`,
      )
    })
  const jsonLimit = limitBody(bodyLimitBytes, 'request body')
  const fileLimit = limitBody(fileLimitBytes, 'file')
  // Bodies sent to a port stream through to the sandbox's server (flow-controlled): no limit here.
  app.use('/v1/*', (c, next) =>
    isPortPath(c.req.path) ? next() : c.req.path.endsWith('/files') ? fileLimit(c, next) : jsonLimit(c, next),
  )
  app.use('/mcp', jsonLimit)
  // Before authentication: a rebinding page's request is refused for its Host/Origin, whatever its key.
  const mcpHeaders = deps.mcp?.checkHeaders?.bind(deps.mcp)
  if (mcpHeaders)
    app.use('/mcp', async (c, next) => {
      mcpHeaders(c.req.raw.headers)
      await next()
    })
  const authenticate: MiddlewareHandler<HttpEnv> = async (c, next) => {
    const header = c.req.header('authorization') ?? ''
    const m = /^Bearer\s+(\S+)\s*$/i.exec(header)
    // Browsers cannot set headers on a WebSocket: its key may come as a subprotocol (ws-protocols.ts).
    const token =
      m?.[1] ??
      (c.req.header('upgrade')?.toLowerCase() === 'websocket'
        ? keyFromProtocols(c.req.header('sec-websocket-protocol'))
        : undefined)
    if (!token)
      throw new AppError('UNAUTHORIZED', 'missing bearer token: send "Authorization: Bearer <api key>"')
    const principal = deps.keyring.verify(token)
    if (!principal) {
      deps.logger.warn({ path: c.req.path, requestId: c.get('requestId') }, 'rejected an unknown API key')
      throw new InvalidKeyError()
    }
    await admit(limiter, principal.tenant)
    c.set('principal', principal)
    await next()
  }
  app.use('/v1/*', authenticate)
  app.use('/mcp', authenticate)
  app.use('/metrics', authenticate)
  // JSON bodies must be UTF-8: decoding would otherwise put U+FFFD in place of bad bytes silently.
  app.use('/v1/*', (c, next) =>
    c.req.path.endsWith('/files') || isPortPath(c.req.path) ? next() : requireUtf8Body(c, next),
  )
  app.use('/mcp', requireUtf8RawBody)

  // After the auth middleware: Hono runs handlers in registration order, so `GET /v1/providers`
  // registered earlier answered without a key.
  registerSystemRoutes(app, deps)
  registerExecRoutes(app, deps)
  registerSessionRoutes(app, deps)
  registerSnapshotRoutes(app, deps)
  registerPortRoutes(app, deps)
  registerTerminalRoutes(app, deps)
  registerProcessRoutes(app, deps)
  registerCodeRoutes(app, deps)
  registerAgentRunRoutes(app, deps)
  registerEventRoutes(app, deps)
  if (deps.e2b)
    e2bHosts = registerE2BRoutes(app, {
      ...deps,
      e2b: deps.e2b,
      fileLimitBytes,
      admitRequest: (tenant) => admit(limiter, tenant),
    }).hosts
  if (deps.admin) registerAdminRoutes(app, { keyring: deps.keyring, logger: deps.logger, ...deps.admin })
  else
    app.all('/admin/queues/*', () => {
      throw new AppError(
        'UNSUPPORTED',
        'no queue dashboard on this server: it shows BullMQ queues, which only a fleet on queue.driver: bullmq has ' +
          '(the default redis driver and sbx serve have none); list jobs with GET /v1/jobs and watch them on /metrics',
      )
    })
  const mcp = deps.mcp
  if (mcp) app.all('/mcp', (c) => mcp.handle(c.req.raw, c.get('principal')))

  app.doc31('/openapi.json', {
    openapi: '3.1.0',
    info: {
      title: 'sandbox-router',
      version: deps.version ?? '0.1.0',
      description: 'Routes AI agents’ tool calls into sandboxes.',
    },
  })
  app.openAPIRegistry.registerComponent('securitySchemes', 'bearer', { type: 'http', scheme: 'bearer' })
  // The reference's script comes from the installed package, not a CDN; no web fonts, no telemetry,
  // no AI agent (each would ask the internet): the page works offline.
  registerDocsScript(app)
  app.get(
    '/docs',
    Scalar({
      url: '/openapi.json',
      pageTitle: 'sandbox-router API',
      cdn: DOCS_SCRIPT_PATH,
      withDefaultFonts: false,
      telemetry: false,
      agent: { disabled: true },
    }),
  )
  return app
}

/** Whether `path` is a port URL (`/v1/sessions/{id}/ports/{port}…`): its body is the sandbox server's business. */
function isPortPath(path: string): boolean {
  return /^\/v1\/sessions\/[^/]+\/ports(\/|$)/.test(path)
}

/** Decodes as `Request.text()` does: a leading byte-order mark is dropped. */
const utf8 = new TextDecoder()

/** The 400 of a request body that is not valid UTF-8. */
const notUtf8 = (): AppError =>
  new AppError(
    'BAD_REQUEST',
    'invalid request at "(body)": the body is not valid UTF-8; send JSON encoded as UTF-8',
  )

/**
 * Refuses (400) a request body that is not valid UTF-8. The body is read once, straight off the
 * connection (no web `Request` is built for it), and the checked text is what the route's validators
 * and `c.req.text()` / `c.req.json()` then read, from Hono's body cache. The routes under `/v1` read
 * their body only that way; one that reads `c.req.raw` itself must be left out of this middleware (as
 * file uploads and port URLs are) or use {@link requireUtf8RawBody}.
 */
const requireUtf8Body: MiddlewareHandler<HttpEnv> = async (c, next) => {
  if (c.req.method === 'GET' || c.req.method === 'HEAD') return next()
  const bytes = Buffer.from(await c.req.arrayBuffer())
  if (!isUtf8(bytes)) throw notUtf8()
  // Hono keeps each body form as a promise (its type says the value); text() and json() read this one.
  ;(c.req.bodyCache as { text?: Promise<string> }).text = Promise.resolve(utf8.decode(bytes))
  await next()
}

/** {@link requireUtf8Body} for a handler that reads the raw `Request` (MCP's transport): the checked bytes become a new one. */
const requireUtf8RawBody: MiddlewareHandler<HttpEnv> = async (c, next) => {
  const raw = c.req.raw
  if (!raw.body) return next()
  const bytes = new Uint8Array(await raw.arrayBuffer())
  if (!isUtf8(bytes)) throw notUtf8()
  c.req.raw = new Request(raw, { body: bytes })
  await next()
}

/** Counts one request of the tenant; throws RATE_LIMITED past the rate. */
async function admit(limiter: RequestLimiter, tenant: string): Promise<void> {
  const verdict = await limiter.take(tenant)
  if (!verdict.ok) throw new RateLimitedError(verdict.retryAfterMs)
}

/** 429 with a `Retry-After` (seconds). */
export class RateLimitedError extends AppError {
  override readonly name = 'RateLimitedError'
  readonly retryAfterS: number
  constructor(retryAfterMs: number) {
    super('RATE_LIMITED', `too many requests; retry after ${Math.ceil(retryAfterMs / 1000)} s`, {
      retryable: true,
    })
    this.retryAfterS = Math.max(1, Math.ceil(retryAfterMs / 1000))
  }
}

/** 401 for a bearer key that matches no configured key (`error="invalid_token"` in the challenge). */
export class InvalidKeyError extends AppError {
  override readonly name = 'InvalidKeyError'
  constructor() {
    super(
      'UNAUTHORIZED',
      'unknown API key: the bearer token matches no configured key; send a key from apiKeys (or SBX_API_KEY)',
    )
  }
}
