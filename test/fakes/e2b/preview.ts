/**
 * The fake's sandbox proxy for preview hosts `<port>-<sandboxId>.<domain>`: E2B routes on the host
 * name, which localhost cannot resolve, so the fake answers on its one origin and reads the host
 * from the `Host` header (the provider's `previewUrl` points there). A port is reached by exec'ing
 * busybox `nc 127.0.0.1 <port>` in the sandbox's container (its stdin/stdout are the connection),
 * so it works with `NetworkMode: none` too. The traffic access token is checked like E2B does on a
 * sandbox created with `allowPublicTraffic: false`.
 */
import type { IncomingMessage, ServerResponse } from 'node:http'
import { Duplex, PassThrough } from 'node:stream'
import { createDemuxer } from './docker-demux.js'
import type { FakeSandbox, SandboxStore } from './sandboxes.js'
import { type PreviewRelay, relayHttp, relayUpgrade } from '../preview-relay.js'

/** Header with the sandbox's traffic access token. */
const TOKEN_HEADER = 'e2b-traffic-access-token'
/** `<port>-<sandboxId>.` at the start of a preview host. */
const PREVIEW_HOST = /^(\d{1,5})-([a-z0-9]+)\./

/** The port and sandbox a request's `Host` names, when it is a preview host. */
export function previewTarget(req: IncomingMessage): { port: number; sandboxId: string } | undefined {
  const m = PREVIEW_HOST.exec(req.headers.host ?? '')
  return m ? { port: Number(m[1]), sandboxId: m[2] ?? '' } : undefined
}

/** A connection to `port` inside the container: `nc` over an attached exec (stdout demultiplexed). */
async function openInContainer(sandbox: FakeSandbox, port: number): Promise<Duplex> {
  const exec = await sandbox.container.exec({
    Cmd: ['nc', '127.0.0.1', String(port)],
    AttachStdin: true,
    AttachStdout: true,
    AttachStderr: true,
    Tty: false,
  })
  const raw = (await exec.start({ hijack: true, stdin: true })) as Duplex
  const out = new PassThrough()
  raw.on(
    'data',
    createDemuxer((stream, payload) => stream === 1 && out.write(payload)),
  )
  raw.once('end', () => out.end())
  raw.once('close', () => out.end())
  raw.on('error', () => out.destroy())
  const duplex = Duplex.from({ readable: out, writable: raw })
  duplex.once('close', () => raw.destroy())
  return duplex
}

function relayFor(
  store: SandboxStore,
  sandboxId: string,
  port: number,
  req: IncomingMessage,
): PreviewRelay | 403 {
  const sandbox = store.get(sandboxId)
  const closed = {
    status: 502,
    body: { sandboxId, message: 'The sandbox is running but port is not open', port, code: 502 },
  }
  if (sandbox?.state !== 'running') {
    return {
      open: () => Promise.reject(new Error('gone')),
      closed: { status: 502, body: { sandboxId, message: 'The sandbox was not found', code: 502 } },
      consumed: [TOKEN_HEADER],
    }
  }
  if (sandbox.trafficAccessToken && req.headers[TOKEN_HEADER] !== sandbox.trafficAccessToken) return 403
  return { open: () => openInContainer(sandbox, port), closed, consumed: [TOKEN_HEADER] }
}

function forbidden(): string {
  return JSON.stringify({ code: 403, message: 'missing or invalid e2b-traffic-access-token header' })
}

/** Serves one preview request. */
export async function handlePreview(
  store: SandboxStore,
  req: IncomingMessage,
  res: ServerResponse,
): Promise<void> {
  const target = previewTarget(req)
  if (!target) return
  const relay = relayFor(store, target.sandboxId, target.port, req)
  if (relay === 403) {
    res.writeHead(403, { 'content-type': 'application/json' }).end(forbidden())
    return
  }
  await relayHttp(req, res, req.url ?? '/', relay)
}

/** Serves one preview upgrade (WebSocket). */
export async function handlePreviewUpgrade(
  store: SandboxStore,
  req: IncomingMessage,
  socket: Duplex,
  head: Buffer,
): Promise<void> {
  const target = previewTarget(req)
  if (!target) {
    socket.end('HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n')
    return
  }
  const relay = relayFor(store, target.sandboxId, target.port, req)
  if (relay === 403) {
    const body = forbidden()
    socket.end(`HTTP/1.1 403 Forbidden\r\nContent-Length: ${body.length}\r\nConnection: close\r\n\r\n${body}`)
    return
  }
  await relayUpgrade(req, socket, head, req.url ?? '/', relay)
}
