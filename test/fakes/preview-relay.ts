/**
 * What the Daytona and E2B fakes' preview proxies share: relaying one HTTP request, or one
 * WebSocket (any upgrade), to a port inside a sandbox over a byte stream the fake opened into it.
 */
import { type IncomingMessage, type ServerResponse, request as httpRequest } from 'node:http'
import type { Duplex } from 'node:stream'
import { asSocket } from '../../src/http/routes/stream-support.js'

/** How one fake proxy relays: the stream into the sandbox, and its own "port closed" answer. */
export interface PreviewRelay {
  /** Opens a connection to the port inside the sandbox; rejects or gives an empty stream when nothing listens. */
  open(): Promise<Duplex>
  /** The proxy's answer when the port is closed (status 502), as the real service words it. */
  closed: { status: number; body: Record<string, unknown> }
  /** Request headers the proxy consumes (its token) and does not pass into the sandbox. */
  consumed: string[]
}

const HOP = new Set(['connection', 'keep-alive', 'transfer-encoding', 'upgrade', 'proxy-connection'])

function sendClosed(res: ServerResponse, relay: PreviewRelay): void {
  if (res.headersSent) {
    res.destroy()
    return
  }
  const body = Buffer.from(JSON.stringify(relay.closed.body))
  res.writeHead(relay.closed.status, { 'content-type': 'application/json', 'content-length': body.length })
  res.end(body)
}

/** Relays one HTTP request (`path` inside the sandbox server) and streams its answer back. */
export async function relayHttp(
  req: IncomingMessage,
  res: ServerResponse,
  path: string,
  relay: PreviewRelay,
): Promise<void> {
  let stream: Duplex
  try {
    stream = await relay.open()
  } catch {
    sendClosed(res, relay)
    return
  }
  stream.on('error', () => undefined)
  const headers: Record<string, string | string[]> = {}
  for (const [k, v] of Object.entries(req.headers)) {
    if (v !== undefined && !HOP.has(k) && !relay.consumed.includes(k)) headers[k] = v
  }
  const upstream = httpRequest({
    method: req.method,
    path,
    headers,
    createConnection: () => asSocket(stream),
  })
  upstream.once('error', () => {
    stream.destroy()
    sendClosed(res, relay)
  })
  upstream.once('response', (answer) => {
    const out: Record<string, string | string[]> = {}
    for (const [k, v] of Object.entries(answer.headers)) if (v !== undefined && !HOP.has(k)) out[k] = v
    res.writeHead(answer.statusCode ?? 502, out)
    answer.pipe(res)
    answer.once('close', () => stream.destroy())
  })
  res.once('close', () => stream.destroy())
  req.pipe(upstream)
}

/**
 * Relays an upgrade request byte for byte: the request head goes into the sandbox as it came
 * (minus the consumed headers), then both directions are piped. An empty answer means the port is
 * closed: the client then gets the proxy's 502.
 */
export async function relayUpgrade(
  req: IncomingMessage,
  socket: Duplex,
  head: Buffer,
  path: string,
  relay: PreviewRelay,
): Promise<void> {
  socket.on('error', () => undefined)
  let refused = false
  const refuse = (): void => {
    if (refused) return
    refused = true
    const body = JSON.stringify(relay.closed.body)
    socket.end(
      `HTTP/1.1 ${relay.closed.status} Bad Gateway\r\nContent-Type: application/json\r\n` +
        `Content-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
    )
  }
  let stream: Duplex
  try {
    stream = await relay.open()
  } catch {
    refuse()
    return
  }
  stream.on('error', () => undefined)
  let lines = `${req.method ?? 'GET'} ${path} HTTP/1.1\r\n`
  for (let i = 0; i + 1 < req.rawHeaders.length; i += 2) {
    const k = req.rawHeaders[i] ?? ''
    if (!relay.consumed.includes(k.toLowerCase())) lines += `${k}: ${req.rawHeaders[i + 1] ?? ''}\r\n`
  }
  stream.write(`${lines}\r\n`)
  if (head.length) stream.write(head)
  let answered = false
  stream.on('data', (chunk: Buffer) => {
    answered = true
    socket.write(chunk)
  })
  stream.once('end', () => (answered ? socket.end() : refuse()))
  stream.once('close', () => (answered ? socket.destroy() : refuse()))
  socket.on('data', (chunk: Buffer) => stream.write(chunk))
  socket.once('close', () => stream.destroy())
}
