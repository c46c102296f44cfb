/**
 * The server side of the Connect protocol with the JSON codec, as envd speaks it to the E2B SDK
 * (`@connectrpc/connect-web` with `useBinaryFormat: false`): unary calls are a plain JSON body
 * (`application/json`); server-streaming calls send one enveloped request and answer with
 * enveloped messages (`application/connect+json`), each a 5-byte header (flags, big-endian length)
 * followed by JSON, and end with an envelope whose flags carry 0x02 (end-stream) and whose JSON
 * holds the error, if any.
 */
import type { IncomingMessage, ServerResponse } from 'node:http'
import type { ConnectCode } from '../../../src/http/e2b/connect.js'
import { CONNECT_HTTP_STATUS, envelope, FLAG_END_STREAM, isStreaming } from '../../../src/http/e2b/connect.js'

// The wire format (codes, their HTTP statuses, envelopes) is the product's own: the E2B-compatible
// endpoint's module. Only the node:http plumbing of the fake lives here.
export type { ConnectCode } from '../../../src/http/e2b/connect.js'
export { ConnectRpcError, envelope, parseEnvelopedRequest } from '../../../src/http/e2b/connect.js'

/** Reads a whole request body. */
export async function readBody(req: IncomingMessage): Promise<Buffer> {
  const chunks: Buffer[] = []
  for await (const chunk of req) chunks.push(chunk as Buffer)
  return Buffer.concat(chunks)
}

/** Whether the request is a Connect server-streaming call (enveloped JSON). */
export function isStreamingRequest(req: IncomingMessage): boolean {
  return isStreaming(req.headers['content-type'])
}

/** Answers a unary call. */
export function writeUnary(res: ServerResponse, message: unknown): void {
  const body = Buffer.from(JSON.stringify(message), 'utf8')
  res.writeHead(200, { 'content-type': 'application/json', 'content-length': body.length })
  res.end(body)
}

/** Answers a unary call with a Connect error. */
export function writeUnaryError(res: ServerResponse, code: ConnectCode, message: string): void {
  const body = Buffer.from(JSON.stringify({ code, message }), 'utf8')
  res.writeHead(CONNECT_HTTP_STATUS[code], {
    'content-type': 'application/json',
    'content-length': body.length,
  })
  res.end(body)
}

/** The response half of one server-streaming call. */
export interface ServerStream {
  /** Sends one message; false once the stream has ended (or the client went away). */
  send(message: unknown): boolean
  /** Sends the end-stream envelope (with an error when given); later calls are ignored. */
  end(error?: { code: ConnectCode; message: string }): void
  readonly ended: boolean
  /** Called once when the stream ends for any reason (end(), client disconnect). */
  onEnd(listener: () => void): void
}

/** Starts a server-streaming response. */
export function openStream(res: ServerResponse): ServerStream {
  let ended = false
  const listeners: Array<() => void> = []
  const finish = (): void => {
    if (ended) return
    ended = true
    for (const l of listeners.splice(0)) l()
  }
  res.writeHead(200, { 'content-type': 'application/connect+json' })
  res.on('close', finish)
  return {
    get ended() {
      return ended
    },
    send(message) {
      if (ended || res.destroyed) return false
      res.write(envelope(0, message))
      return true
    },
    end(error) {
      if (ended) return
      if (!res.destroyed) res.end(envelope(FLAG_END_STREAM, error ? { error } : {}))
      finish()
    },
    onEnd(listener) {
      if (ended) listener()
      else listeners.push(listener)
    },
  }
}
