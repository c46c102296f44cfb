/**
 * E2B's sandbox host names on our port: `sandbox.getHost(port)` is `<port>-<sandboxId>.<domain>`,
 * and a request whose `Host` is such a name goes to that port in the sandbox (through the session's
 * port forwarding, as `/v1/sessions/{id}/ports/{port}/…` does), whatever its path. Port 49983 is
 * envd's: the request goes on to the envd routes as if it named the sandbox in `E2b-Sandbox-Id`, so
 * an SDK left without `E2B_SANDBOX_URL` still reaches envd. As on E2B, a sandbox's ports are public
 * to whoever knows its id unless create asked `network.allowPublicTraffic: false`; then a request
 * must carry the `e2b-traffic-access-token` create returned.
 */
import type { Context, MiddlewareHandler } from 'hono'
import { AppError } from '../../errors.js'
import type { HttpEnv } from '../app.js'
import { forwardToPort } from '../routes/ports.js'
import type { E2BRouteDeps } from './deps.js'
import type { E2BLifecycle } from './lifecycle.js'
import type { E2BSandboxStore } from './sandboxes.js'

/** envd's port: a host name with it reaches the envd routes. */
export const ENVD_PORT = 49983

/** The part of a sandbox host name before the domain: `<port>-<sandboxId>`. */
const LABEL = /^(\d{1,5})-(e2b-[0-9a-f]+)\.(.+)$/i

/**
 * The domain this server reports for `request`'s sandboxes: the configured one, else
 * `localhost:<port of the Host header>` (`localhost` when the header names none).
 */
export function sandboxDomain(configured: string | undefined, hostHeader: string | undefined): string {
  if (configured) return configured
  const port = /:(\d{1,5})$/.exec(hostHeader ?? '')?.[1]
  return port ? `localhost:${port}` : 'localhost'
}

const bare = (hostPort: string): string => hostPort.replace(/:\d{1,5}$/, '').toLowerCase()

/**
 * `{ port, sandboxId }` when `host` (a `Host` header) is `<port>-<sandboxId>.<domain>` under this
 * server's domain: the configured one (its port, when it names one, must match too), else any
 * `localhost` name.
 */
export function parseSandboxHost(
  host: string | undefined,
  configured: string | undefined,
): { port: number; sandboxId: string } | undefined {
  const m = LABEL.exec(host ?? '')
  if (!m) return undefined
  const [, rawPort = '', sandboxId = '', rest = ''] = m
  const ok = configured
    ? /:\d{1,5}$/.test(configured)
      ? rest.toLowerCase() === configured.toLowerCase()
      : bare(rest) === configured.toLowerCase()
    : bare(rest) === 'localhost'
  const port = Number(rawPort)
  if (!ok || !(port >= 1 && port <= 65_535)) return undefined
  return { port, sandboxId: sandboxId.toLowerCase() }
}

/** E2B's proxy answer for a host name it cannot serve (502, `{ message, sandboxId, code }`). */
function proxyError(message: string, sandboxId: string, extra: Record<string, unknown> = {}): Response {
  return Response.json({ message, sandboxId, code: 502, ...extra }, { status: 502 })
}

/**
 * The middleware that serves sandbox host names; every other request goes on unchanged. Register it
 * before authentication and body limits: the request belongs to the sandbox's server.
 */
export function sandboxHostRouter(
  deps: E2BRouteDeps,
  store: E2BSandboxStore,
  lifecycle: E2BLifecycle,
): MiddlewareHandler<HttpEnv> {
  return async (c: Context<HttpEnv>, next) => {
    const target = parseSandboxHost(c.req.header('host'), deps.e2b.domain)
    if (!target) return next()
    const s = await store.byId(target.sandboxId)
    if (!s) return proxyError('The sandbox was not found', target.sandboxId)
    if (target.port === ENVD_PORT) {
      // envd: the routes behind check the X-Access-Token as for any envd call.
      const headers = new Headers(c.req.raw.headers)
      headers.set('e2b-sandbox-id', s.sandboxId)
      c.req.raw = new Request(c.req.raw, { headers })
      return next()
    }
    if (s.trafficAccessToken && c.req.header('e2b-traffic-access-token') !== s.trafficAccessToken)
      return Response.json(
        {
          message:
            'this sandbox was created with network.allowPublicTraffic false: send the e2b-traffic-access-token header create returned',
          sandboxId: s.sandboxId,
          code: 403,
        },
        { status: 403 },
      )
    await deps.admitRequest(s.tenant)
    // A paused sandbox answers only when created with autoResume: the request wakes it first.
    if (s.paused) {
      const woken = await lifecycle.wake(s).catch((err: unknown) => {
        deps.logger.warn({ err, sandboxId: s.sandboxId }, 'could not auto-resume an e2b sandbox')
        return false
      })
      if (!woken) return proxyError('The sandbox is paused', s.sandboxId)
    }
    const url = new URL(c.req.url)
    try {
      return await forwardToPort(c, deps, s.tenant, {
        sessionId: s.sandboxId,
        port: target.port,
        path: url.pathname + url.search,
        prefix: '',
        // As E2B's proxy: the sandbox server sees the host name it was called by, or the create's mask.
        host: s.maskRequestHost?.replaceAll('${PORT}', String(target.port)) ?? c.req.header('host') ?? '',
      })
    } catch (err) {
      if (err instanceof AppError && err.code === 'PORT_UNREACHABLE')
        return proxyError('The sandbox is running but port is not open', s.sandboxId, {
          port: target.port,
          reason: err.message,
        })
      if (err instanceof AppError && err.code === 'NOT_FOUND')
        return proxyError('The sandbox was not found', s.sandboxId)
      throw err
    }
  }
}
