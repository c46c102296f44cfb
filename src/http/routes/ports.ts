import { upgradeWebSocket } from '@hono/node-server'
import type { IncomingMessage } from 'node:http'
import { request as httpRequest } from 'node:http'
import { Readable } from 'node:stream'
import type { PortStream } from '../../sandbox/types.js'
import { z } from '@hono/zod-openapi'
import type { Context } from 'hono'
import WebSocket from 'ws'
import { AppError } from '../../errors.js'
import type { App, HttpEnv } from '../app.js'
import type { AppDeps } from '../deps.js'
import { ErrorSchema } from '../schemas.js'
import { appProtocols, chosenProtocols } from '../ws-protocols.js'
import { asSocket, openDeadline, streamsUnavailable } from './stream-support.js'

/** `/v1/sessions/{id}/ports/{port}/<path>`: the three parts of a port URL. */
const PORT_PATH = /^\/v1\/sessions\/([^/]+)\/ports\/([^/]*)(\/.*)?$/

/** Request headers not forwarded into the sandbox: hop-by-hop ones, and the caller's API key. */
const DROP_REQUEST = new Set([
  'authorization',
  'connection',
  'keep-alive',
  'proxy-authorization',
  'proxy-connection',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
  'host',
  'sec-websocket-key',
  'sec-websocket-version',
  'sec-websocket-extensions',
  'sec-websocket-protocol',
])
/** Response headers not passed back (hop-by-hop; the service frames the body itself). */
const DROP_RESPONSE = new Set([
  'connection',
  'keep-alive',
  'transfer-encoding',
  'proxy-authenticate',
  'trailer',
  'upgrade',
])

/** Where a forwarded request goes: a port of a session's sandbox, and the path on it. */
export interface PortTarget {
  sessionId: string
  port: number
  /** Path and query inside the sandbox server. */
  path: string
  /** The URL prefix the request came under (`X-Forwarded-Prefix`); empty for a host-routed one. */
  prefix: string
  /** The `Host` the sandbox server sees. @default `localhost:<port>` */
  host?: string
}

function targetOf(c: Context<HttpEnv>): PortTarget {
  const url = new URL(c.req.url)
  const m = PORT_PATH.exec(url.pathname)
  const sessionId = decodeURIComponent(m?.[1] ?? '')
  const raw = m?.[2] ?? ''
  const port = /^\d{1,5}$/.test(raw) ? Number(raw) : NaN
  if (!(port >= 1 && port <= 65535))
    throw new AppError(
      'BAD_REQUEST',
      `invalid port ${JSON.stringify(raw)} in the URL: use /v1/sessions/{id}/ports/{1-65535}/<path>`,
    )
  return {
    sessionId,
    port,
    path: (m?.[3] ?? '/') + url.search,
    prefix: `/v1/sessions/${m?.[1] ?? ''}/ports/${port}`,
  }
}

function forwardHeaders(c: Context<HttpEnv>, t: PortTarget, stream: PortStream): Record<string, string> {
  const out: Record<string, string> = {}
  c.req.raw.headers.forEach((value, key) => {
    if (!DROP_REQUEST.has(key)) out[key] = value
  })
  // Through a provider's preview proxy: its host and token (set last, so a caller cannot forge them).
  const preview = stream.preview
  out['host'] = preview ? preview.host : (t.host ?? `localhost:${t.port}`)
  for (const [k, v] of Object.entries(preview?.headers ?? {})) out[k.toLowerCase()] = v
  out['x-forwarded-host'] = c.req.header('host') ?? ''
  out['x-forwarded-proto'] = new URL(c.req.url).protocol.replace(':', '')
  if (t.prefix) out['x-forwarded-prefix'] = t.prefix
  // Names as most proxies send them (`Host`, `Accept-Encoding`): a server that keeps the case it
  // received (Python's http.server) shows the usual one.
  return Object.fromEntries(Object.entries(out).map(([k, v]) => [canonicalName(k), v]))
}

/** `accept-encoding` → `Accept-Encoding`. */
const canonicalName = (name: string): string =>
  name.replace(/(^|-)([a-z])/g, (_, dash: string, ch: string) => dash + ch.toUpperCase())

/**
 * Port forwarding: any method on `/v1/sessions/{id}/ports/{port}/<path>` is sent, as HTTP/1.1, to
 * the server listening on that port inside the session's sandbox (over the sandbox's own channel:
 * the sandbox keeps `network: none`), and its answer streams back. A WebSocket upgrade there is
 * relayed message by message to the sandbox server's WebSocket. For Daytona and E2B sessions the
 * stream is a connection to the provider's preview proxy (`PortStream.preview`): requests carry its
 * host and token, and its own "port closed" 502 becomes `PORT_UNREACHABLE`.
 */
export function registerPortRoutes(app: App, deps: AppDeps): void {
  const handler = (c: Context<HttpEnv>): Promise<Response> =>
    forwardToPort(c, deps, c.get('principal').tenant, targetOf(c))
  app.all('/v1/sessions/:id/ports/:port', handler)
  app.all('/v1/sessions/:id/ports/:port/*', handler)
  documentPortRoute(app)
}

/**
 * Sends the request of `c` (HTTP, or a WebSocket upgrade relayed message by message) to
 * `target.port` in the sandbox of `tenant`'s session `target.sessionId`, and streams the answer back.
 * NOT_FOUND for another tenant's or an unknown session, PORT_UNREACHABLE when nothing answers there.
 */
export async function forwardToPort(
  c: Context<HttpEnv>,
  deps: Pick<AppDeps, 'streams'>,
  tenant: string,
  t: PortTarget,
): Promise<Response> {
  const streams = deps.streams
  if (!streams) throw streamsUnavailable('ports')
  const { stream } = await streams.openPort(tenant, t.sessionId, t.port, { signal: c.req.raw.signal })
  if (c.req.header('upgrade')?.toLowerCase() === 'websocket') return relayWebSocket(c, t, stream)
  return forwardHttp(c, t, stream)
}

const err = (description: string) => ({
  content: { 'application/json': { schema: ErrorSchema } },
  description,
})

/** The port URL in the OpenAPI document (one entry per method: any method is forwarded). */
function documentPortRoute(app: App): void {
  for (const method of ['get', 'post', 'put', 'patch', 'delete', 'head', 'options'] as const) {
    app.openAPIRegistry.registerPath({
      method,
      path: '/v1/sessions/{id}/ports/{port}/{path}',
      summary: 'Forward a request to a server listening on a port inside the session’s sandbox',
      description:
        'The request (method, headers without `Authorization` and hop-by-hop ones, body, query) is sent as ' +
        'HTTP/1.1 to `127.0.0.1:{port}` inside the sandbox over its agent channel (the sandbox keeps ' +
        '`network: none`), with `Host: localhost:{port}` and `X-Forwarded-Host`/`-Proto`/`-Prefix`; the answer ' +
        'streams back as the server sent it. A WebSocket upgrade on this URL is relayed message by message to ' +
        'the server’s WebSocket (the key may then travel as subprotocol `sbx.bearer.<base64url key>`). ' +
        'Bodies are not limited by `server.bodyLimitBytes`. On Daytona and E2B sessions the request goes ' +
        'through the provider’s preview proxy instead (Daytona `getPreviewLink`, E2B ' +
        '`<port>-<sandboxId>.<domain>`), the provider’s token added by the service and never shown to the ' +
        'caller; `Host` is then the preview host. `sbx serve` only (not `sbx api`).',
      security: [{ bearer: [] }],
      request: {
        params: z.object({
          id: z.string().openapi({ example: 'web' }),
          port: z
            .string()
            .regex(/^\d{1,5}$/)
            .openapi({ example: '8000', description: '1-65535' }),
          path: z
            .string()
            .openapi({ example: 'index.html', description: 'path (and query) inside the server' }),
        }),
      },
      responses: {
        200: { description: 'whatever the server in the sandbox answered (any status, headers and body)' },
        400: err('the port is not 1-65535'),
        404: err('no such session (or another tenant’s)'),
        501: err('UNSUPPORTED: the session’s provider has no ports, or this process is `sbx api`'),
        502: err(
          'PORT_UNREACHABLE: nothing listens on that port in the sandbox (or the provider’s preview proxy says so), or it did not answer HTTP',
        ),
        503: err('UNAVAILABLE: the provider’s preview proxy cannot be reached'),
      },
    })
  }
}

/** Path of the request on the stream: under the preview URL's own path when it has one. */
const upstreamPath = (t: PortTarget, stream: PortStream): string => (stream.preview?.basePath ?? '') + t.path

/** Largest proxy 502 body read to tell "port closed" from the sandbox server's own 502 (bytes). */
const PROXY_ERROR_BODY_BYTES = 64 * 1024

async function forwardHttp(c: Context<HttpEnv>, t: PortTarget, stream: PortStream): Promise<Response> {
  const method = c.req.method
  const req = httpRequest({
    method,
    path: upstreamPath(t, stream),
    headers: forwardHeaders(c, t, stream),
    createConnection: () => asSocket(stream),
  })
  const abort = (): void => {
    req.destroy()
    stream.destroy()
  }
  c.req.raw.signal.addEventListener('abort', abort, { once: true })
  const answered = new Promise<IncomingMessage>((resolve, reject) => {
    req.once('response', resolve)
    req.once('error', (err) =>
      reject(
        new AppError(
          'PORT_UNREACHABLE',
          `the server on port ${t.port} in the sandbox closed the connection without an HTTP answer (${err.message}); check that it speaks HTTP/1.1`,
          { cause: err },
        ),
      ),
    )
  })
  const body = c.req.raw.body
  if (body && method !== 'GET' && method !== 'HEAD') Readable.fromWeb(body as never).pipe(req)
  else req.end()
  let res: IncomingMessage
  try {
    res = await answered
  } catch (err) {
    stream.destroy()
    throw err
  }
  // A reset mid-body ends the body stream (Readable.toWeb); the request's own late error is not news.
  req.on('error', () => undefined)
  res.once('close', () => stream.destroy())
  const headers = new Headers()
  for (let i = 0; i + 1 < res.rawHeaders.length; i += 2) {
    const k = res.rawHeaders[i] ?? ''
    if (!DROP_RESPONSE.has(k.toLowerCase())) headers.append(k, res.rawHeaders[i + 1] ?? '')
  }
  const status = res.statusCode ?? 502
  if (stream.preview && status === 502) return proxyBadGateway(res, headers, t, stream.preview)
  const empty = method === 'HEAD' || status === 204 || status === 304 || (status >= 100 && status < 200)
  if (empty) res.resume()
  return new Response(empty ? null : (Readable.toWeb(res) as ReadableStream), { status, headers })
}

/**
 * A 502 from a preview proxy: PORT_UNREACHABLE when the provider's proxy says nothing listens on
 * the port, else the sandbox server's own 502, passed on as it came.
 */
async function proxyBadGateway(
  res: IncomingMessage,
  headers: Headers,
  t: PortTarget,
  preview: NonNullable<PortStream['preview']>,
): Promise<Response> {
  const chunks: Buffer[] = []
  let size = 0
  for await (const chunk of res.iterator({ destroyOnReturn: false }) as AsyncIterable<Buffer>) {
    size += chunk.length
    if (size > PROXY_ERROR_BODY_BYTES) {
      // Too long for a proxy's error page: the server's own answer, streamed on from here.
      chunks.push(chunk)
      const rest = Readable.from(
        (async function* () {
          yield* chunks
          yield* res as AsyncIterable<Buffer>
        })(),
      )
      return new Response(Readable.toWeb(rest) as ReadableStream, { status: 502, headers })
    }
    chunks.push(chunk)
  }
  const body = Buffer.concat(chunks)
  if (preview.unreachable(body.toString('utf8')))
    throw new AppError(
      'PORT_UNREACHABLE',
      `nothing listens on port ${t.port} in the sandbox (the provider's preview proxy could not connect); start a server on 0.0.0.0:${t.port} first`,
    )
  return new Response(body, { status: 502, headers })
}

/** Messages held for a slow receiver before its sender is paused (bytes). */
const RELAY_HIGH_WATER_BYTES = 1024 * 1024

/** Sends one message on `to`; while `to` holds too much, `from` stops reading until it drained. */
function relay(to: WebSocket, from: WebSocket, data: WebSocket.RawData | string, binary: boolean): void {
  if (to.readyState !== WebSocket.OPEN) return
  to.send(data, { binary }, () => {
    if (from.isPaused && to.bufferedAmount < RELAY_HIGH_WATER_BYTES / 2) from.resume()
  })
  if (to.bufferedAmount > RELAY_HIGH_WATER_BYTES) from.pause()
}

/** Connects to the sandbox server's WebSocket first, then accepts the caller's and relays messages. */
async function relayWebSocket(c: Context<HttpEnv>, t: PortTarget, stream: PortStream): Promise<Response> {
  const headers = forwardHeaders(c, t, stream)
  const upstream = new WebSocket(
    `ws://localhost:${t.port}${upstreamPath(t, stream)}`,
    appProtocols(c.req.header('sec-websocket-protocol')),
    {
      headers,
      createConnection: (() => asSocket(stream)) as never,
      perMessageDeflate: false,
    },
  )
  await new Promise<void>((resolve, reject) => {
    upstream.once('open', () => resolve())
    upstream.once('unexpected-response', (_req, res) => {
      reject(
        new AppError(
          'PORT_UNREACHABLE',
          `the server on port ${t.port} in the sandbox answered the WebSocket upgrade with HTTP ${res.statusCode}`,
        ),
      )
      stream.destroy()
    })
    upstream.once('error', (err) => {
      reject(
        new AppError(
          'PORT_UNREACHABLE',
          `WebSocket to port ${t.port} in the sandbox failed: ${err.message}`,
          { cause: err },
        ),
      )
      stream.destroy()
    })
  })
  upstream.on('error', () => upstream.terminate())
  // The caller's handshake may still fail: then nothing would ever close the sandbox side.
  const deadline = openDeadline(15_000, () => upstream.terminate())
  const incoming = (c.env as { incoming?: IncomingMessage } | undefined)?.incoming
  if (incoming) chosenProtocols.set(incoming, upstream.protocol)
  const closeCode = (code: number): number => (code === 1005 || code === 1006 || code < 1000 ? 1000 : code)
  return upgradeWebSocket(c, {
    onOpen: (_evt, ws) => {
      deadline.opened()
      const raw = ws.raw as WebSocket
      upstream.on('message', (data, isBinary) => relay(raw, upstream, data, isBinary))
      upstream.on('close', (code, reason) => ws.close(closeCode(code), reason.toString()))
    },
    onMessage: (evt, ws) => {
      const d = evt.data
      const raw = ws.raw as WebSocket
      if (typeof d === 'string') relay(upstream, raw, d, false)
      else if (d instanceof ArrayBuffer) relay(upstream, raw, Buffer.from(d), true)
    },
    onClose: (evt) => {
      if (upstream.readyState === WebSocket.OPEN) upstream.close(closeCode(evt.code), evt.reason)
      else upstream.terminate()
    },
    onError: () => upstream.terminate(),
  })
}
