/**
 * The server side of the Connect protocol with the JSON codec, as envd speaks it to the E2B SDK
 * (`@connectrpc/connect-web` with `useBinaryFormat: false`): unary calls are a plain JSON body
 * (`application/json`); server-streaming calls send one enveloped request and answer with
 * enveloped messages (`application/connect+json`), each a 5-byte header (flags, big-endian length)
 * followed by JSON, and end with an envelope whose flags carry 0x02 (end-stream) and whose JSON
 * holds the error, if any.
 */
import type { IncomingMessage, ServerResponse } from 'node:http'

/** Connect error codes (the string forms on the wire). */
export type ConnectCode =
  | 'canceled'
  | 'unknown'
  | 'invalid_argument'
  | 'deadline_exceeded'
  | 'not_found'
  | 'already_exists'
  | 'permission_denied'
  | 'resource_exhausted'
  | 'failed_precondition'
  | 'aborted'
  | 'out_of_range'
  | 'unimplemented'
  | 'internal'
  | 'unavailable'
  | 'data_loss'
  | 'unauthenticated'

/** HTTP status of a unary error, per the Connect protocol specification. */
const HTTP_STATUS: Record<ConnectCode, number> = {
  canceled: 499,
  unknown: 500,
  invalid_argument: 400,
  deadline_exceeded: 504,
  not_found: 404,
  already_exists: 409,
  permission_denied: 403,
  resource_exhausted: 429,
  failed_precondition: 400,
  aborted: 409,
  out_of_range: 400,
  unimplemented: 501,
  internal: 500,
  unavailable: 503,
  data_loss: 500,
  unauthenticated: 401,
}

/** An error a handler throws to answer with a Connect error. */
export class ConnectRpcError extends Error {
  constructor(
    readonly code: ConnectCode,
    message: string,
  ) {
    super(message)
  }
}

const FLAG_END_STREAM = 0x02

/** Reads a whole request body. */
export async function readBody(req: IncomingMessage): Promise<Buffer> {
  const chunks: Buffer[] = []
  for await (const chunk of req) chunks.push(chunk as Buffer)
  return Buffer.concat(chunks)
}

/** Frames one message as an envelope. */
export function envelope(flags: number, json: unknown): Buffer {
  const payload = Buffer.from(JSON.stringify(json), 'utf8')
  const head = Buffer.alloc(5)
  head.writeUInt8(flags, 0)
  head.writeUInt32BE(payload.length, 1)
  return Buffer.concat([head, payload])
}

/** Parses the single enveloped message of a server-streaming request. */
export function parseEnvelopedRequest(body: Buffer): unknown {
  if (body.length < 5) throw new ConnectRpcError('invalid_argument', 'request envelope is too short')
  const length = body.readUInt32BE(1)
  if (body.length < 5 + length) throw new ConnectRpcError('invalid_argument', 'request envelope is truncated')
  return JSON.parse(body.subarray(5, 5 + length).toString('utf8')) as unknown
}

/** Whether the request is a Connect server-streaming call (enveloped JSON). */
export function isStreamingRequest(req: IncomingMessage): boolean {
  return (req.headers['content-type'] ?? '').startsWith('application/connect+json')
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
  res.writeHead(HTTP_STATUS[code], { 'content-type': 'application/json', 'content-length': body.length })
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
