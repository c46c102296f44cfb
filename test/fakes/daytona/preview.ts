/**
 * The fake's preview proxy. Daytona's preview URL is `https://<port>-<sandboxId>.<proxy domain>`,
 * a host name localhost cannot resolve; the fake's `getPreviewLink` URL is instead
 * `<fake origin>/preview/<sandboxId>/<port>` (the adapter sends any path under it). The backing
 * container is a sandbox of our Docker provider, so a port is reached through its `openPort` (the
 * agent channel: works with `network: none`). A sandbox that is not `public` needs the link's token
 * in `x-daytona-preview-token`, like Daytona; a closed port answers Daytona's proxy error shape.
 */
import { randomBytes } from 'node:crypto'
import type { IncomingMessage, ServerResponse } from 'node:http'
import type { Duplex } from 'node:stream'
import type { FakeContext } from './control-plane.js'
import { sendJson } from './http-util.js'
import type { FakeSandboxRecord } from './records.js'
import { touch } from './lifecycle.js'
import { type PreviewRelay, relayHttp, relayUpgrade } from '../preview-relay.js'

const TOKEN_HEADER = 'x-daytona-preview-token'
const PREVIEW_PATH = /^\/preview\/([^/]+)\/(\d{1,5})(\/.*)?$/

/** Tokens of the preview links handed out, per sandbox (one per sandbox, as Daytona does). */
const tokens = new WeakMap<FakeSandboxRecord, string>()

/** The token of a sandbox's preview links. */
export function previewToken(record: FakeSandboxRecord): string {
  let token = tokens.get(record)
  if (!token) {
    token = randomBytes(16).toString('hex')
    tokens.set(record, token)
  }
  return token
}

/** `GET /api/sandbox/{id}/ports/{port}/preview-url`: `{ sandboxId, url, token }`. */
export function sendPreviewLink(
  ctx: FakeContext,
  record: FakeSandboxRecord,
  port: number,
  res: ServerResponse,
): void {
  sendJson(res, 200, {
    sandboxId: record.id,
    url: `${ctx.origin}/preview/${record.id}/${port}`,
    token: previewToken(record),
  })
}

const proxyError = (status: number, code: string, message: string, path: string) => ({
  statusCode: status,
  message,
  code,
  timestamp: new Date().toISOString(),
  path,
  method: 'GET',
})

type Resolved = { relay: PreviewRelay; path: string } | { status: number; body: Record<string, unknown> }

function resolve(ctx: FakeContext, req: IncomingMessage): Resolved | undefined {
  const url = new URL(req.url ?? '/', 'http://fake')
  const m = PREVIEW_PATH.exec(url.pathname)
  if (!m) return undefined
  const path = (m[3] ?? '/') + url.search
  const port = Number(m[2])
  const record = ctx.records.get(m[1] ?? '')
  const backend = record?.backend
  if (!record || !backend || record.state !== 'started')
    return { status: 404, body: proxyError(404, 'NOT_FOUND', 'sandbox not found or not started', path) }
  if (!record.public && req.headers[TOKEN_HEADER] !== previewToken(record))
    return { status: 401, body: proxyError(401, 'UNAUTHORIZED', 'missing or invalid preview token', path) }
  // Preview traffic goes through Daytona's proxy too: it is activity (auto-stop counts from it).
  touch(record)
  const open = backend.openPort?.bind(backend)
  return {
    path,
    relay: {
      open: () => (open ? open(port) : Promise.reject(new Error('no ports'))),
      closed: {
        status: 502,
        body: proxyError(
          502,
          'BAD_GATEWAY',
          `bad gateway: dial tcp 127.0.0.1:${port}: connect: connection refused`,
          path,
        ),
      },
      consumed: [TOKEN_HEADER, 'x-daytona-skip-preview-warning'],
    },
  }
}

/** Whether the request is for the preview proxy (no API key: the proxy has its own token). */
export const isPreview = (req: IncomingMessage): boolean => (req.url ?? '').startsWith('/preview/')

/** Serves one preview request. */
export async function handlePreview(
  ctx: FakeContext,
  req: IncomingMessage,
  res: ServerResponse,
): Promise<void> {
  const r = resolve(ctx, req)
  if (!r) return sendJson(res, 404, proxyError(404, 'NOT_FOUND', 'no such preview', req.url ?? '/'))
  if ('status' in r) return sendJson(res, r.status, r.body)
  await relayHttp(req, res, r.path, r.relay)
}

/** Serves one preview upgrade (WebSocket). */
export async function handlePreviewUpgrade(
  ctx: FakeContext,
  req: IncomingMessage,
  socket: Duplex,
  head: Buffer,
): Promise<void> {
  const r = resolve(ctx, req)
  if (!r || 'status' in r) {
    const body = JSON.stringify(r && 'status' in r ? r.body : {})
    const status = r && 'status' in r ? r.status : 404
    socket.end(
      `HTTP/1.1 ${status} Refused\r\nContent-Length: ${body.length}\r\nConnection: close\r\n\r\n${body}`,
    )
    return
  }
  await relayUpgrade(req, socket, head, r.path, r.relay)
}
