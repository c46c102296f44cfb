/**
 * Connect protocol framing (JSON codec) for envd's RPC as the `e2b` SDK speaks it: unary calls are
 * plain JSON, server-streaming calls send and receive 5-byte-enveloped JSON messages
 * (`application/connect+json`), the last one flagged end-of-stream and carrying any error.
 */

/** Connect error codes (their string forms on the wire). */
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
export const CONNECT_HTTP_STATUS: Readonly<Record<ConnectCode, number>> = {
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

/** An error an envd handler throws to answer with a Connect error. */
export class ConnectRpcError extends Error {
  override readonly name = 'ConnectRpcError'
  constructor(
    readonly code: ConnectCode,
    message: string,
  ) {
    super(message)
  }
}

/** Envelope flag of the last message of a stream. */
export const FLAG_END_STREAM = 0x02

/** Frames one message as an envelope. */
export function envelope(flags: number, json: unknown): Uint8Array {
  const payload = Buffer.from(JSON.stringify(json), 'utf8')
  const out = Buffer.alloc(5 + payload.length)
  out.writeUInt8(flags, 0)
  out.writeUInt32BE(payload.length, 1)
  payload.copy(out, 5)
  return out
}

/** Parses the single enveloped message of a server-streaming request. */
export function parseEnvelopedRequest(body: Uint8Array): unknown {
  const buf = Buffer.from(body)
  if (buf.length < 5) throw new ConnectRpcError('invalid_argument', 'request envelope is too short')
  const length = buf.readUInt32BE(1)
  if (buf.length < 5 + length) throw new ConnectRpcError('invalid_argument', 'request envelope is truncated')
  try {
    return JSON.parse(buf.subarray(5, 5 + length).toString('utf8')) as unknown
  } catch {
    throw new ConnectRpcError('invalid_argument', 'request message is not JSON')
  }
}

/** Whether a request with this content type is a server-streaming call. */
export function isStreaming(contentType: string | undefined): boolean {
  return (contentType ?? '').startsWith('application/connect+json')
}

/** A unary answer. */
export function unaryResponse(message: unknown): Response {
  return Response.json(message)
}

/** A unary Connect error. */
export function unaryError(code: ConnectCode, message: string): Response {
  return Response.json({ code, message }, { status: CONNECT_HTTP_STATUS[code] })
}

/** The writing half of one server-streaming answer. */
export interface ServerStream {
  /** Sends one message; false once the stream has ended (or the client went away). */
  send(message: unknown): boolean
  /** Sends the end-stream envelope (with an error when given); later calls are ignored. */
  end(error?: { code: ConnectCode; message: string }): void
  /** Breaks the stream without an end envelope (the client sees the connection drop). */
  drop(): void
  readonly ended: boolean
  /** Aborted when the stream ends for any reason (end(), client disconnect). */
  readonly signal: AbortSignal
  /**
   * Resolves true once the client has taken enough of what was sent that more may follow (less than
   * {@link STREAM_HIGH_WATER_BYTES} waits to go out), or once the stream ended; false when that
   * did not happen within `timeoutMs`. A sender that waits on it sends no faster than the client
   * reads (the socket's own backpressure reaches the queue).
   */
  ready(timeoutMs: number): Promise<boolean>
}

/** Bytes a stream queues for a client that reads slower than the server sends, before {@link ServerStream.ready} waits. */
export const STREAM_HIGH_WATER_BYTES = 1024 * 1024

/**
 * Opens a server-streaming answer: the response to return and the stream to write it through. Each
 * message goes out as `{ event: message }` (process.Process's responses, whose one field is `event`);
 * with `inline`, as it is (a response whose oneof is at its top level, as filesystem's WatchDir).
 */
export function openStream(opts: { inline?: boolean } = {}): { response: Response; stream: ServerStream } {
  const done = new AbortController()
  let controller!: ReadableStreamDefaultController<Uint8Array>
  /** Senders waiting for room in the queue (woken by `pull`, which runs once there is room). */
  let waiting: (() => void)[] = []
  const wake = (): void => {
    const w = waiting
    waiting = []
    for (const f of w) f()
  }
  done.signal.addEventListener('abort', wake, { once: true })
  const body = new ReadableStream<Uint8Array>(
    {
      start: (c) => {
        controller = c
      },
      pull: wake,
      cancel: () => done.abort(),
    },
    { highWaterMark: STREAM_HIGH_WATER_BYTES, size: (chunk) => chunk.byteLength },
  )
  const stream: ServerStream = {
    get ended() {
      return done.signal.aborted
    },
    signal: done.signal,
    ready(timeoutMs) {
      if (done.signal.aborted || (controller.desiredSize ?? 1) > 0) return Promise.resolve(true)
      return new Promise((resolve) => {
        const timer = setTimeout(() => {
          waiting = waiting.filter((f) => f !== go)
          resolve(false)
        }, timeoutMs)
        const go = (): void => {
          clearTimeout(timer)
          resolve(true)
        }
        waiting.push(go)
      })
    },
    send(message) {
      if (done.signal.aborted) return false
      controller.enqueue(envelope(0, opts.inline ? message : { event: message }))
      return true
    },
    drop() {
      if (done.signal.aborted) return
      controller.error(new Error('stream dropped'))
      done.abort()
    },
    end(error) {
      if (done.signal.aborted) return
      controller.enqueue(envelope(FLAG_END_STREAM, error ? { error } : {}))
      controller.close()
      done.abort()
    },
  }
  return {
    response: new Response(body, { status: 200, headers: { 'content-type': 'application/connect+json' } }),
    stream,
  }
}
