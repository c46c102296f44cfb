import { createServer, type IncomingHttpHeaders, type IncomingMessage, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'

/** One HTTP request the fake server received. */
export interface RecordedRequest {
  readonly method: string
  readonly path: string
  readonly headers: IncomingHttpHeaders
  /** The parsed JSON body (undefined when the body was empty or not JSON). */
  readonly body: unknown
  /** Resolves when the client dropped the connection before an answer was sent (abort, timeout). */
  readonly abandoned: Promise<void>
}

/** What the server does with one request. */
export type ScriptedReply =
  | {
      readonly kind: 'json'
      readonly status: number
      readonly body: unknown
      readonly headers?: Readonly<Record<string, string>>
    }
  /** Never answers: the client must time out or abort. */
  | { readonly kind: 'hang' }

/** Wire details of one provider, given by the provider-specific fakes. */
export interface WireFormat {
  readonly method: 'POST'
  readonly path: string
  /** Checks the credentials; returns the provider's auth error reply, or undefined to proceed. */
  readonly authenticate: (headers: IncomingHttpHeaders) => ScriptedReply | undefined
  /** The provider's error reply in its own format. */
  readonly error: (status: number, message: string) => ScriptedReply
  /** Headers every answer carries (request ids and the like). */
  readonly responseHeaders: () => Record<string, string>
}

/** A local HTTP server (127.0.0.1, port 0) that answers with scripted replies, in order. */
export interface ScriptedServer {
  /** `http://127.0.0.1:<port>` */
  readonly origin: string
  readonly requests: readonly RecordedRequest[]
  /** Queues replies; each request takes the next one. */
  reply(...replies: ScriptedReply[]): void
  /** Resolves when the request with this index (0-based) has arrived. */
  requestAt(index: number): Promise<RecordedRequest>
  /** Drops every open connection (hung requests included) and stops listening. */
  close(): Promise<void>
}

interface Deferred<T> {
  readonly promise: Promise<T>
  resolve(value: T): void
}

function deferred<T>(): Deferred<T> {
  let resolve!: (value: T) => void
  const promise = new Promise<T>((r) => (resolve = r))
  return { promise, resolve }
}

/** Starts a scripted server speaking `wire`. An unscripted request gets a non-retryable 500. */
export async function startScriptedServer(wire: WireFormat): Promise<ScriptedServer> {
  const script: ScriptedReply[] = []
  const requests: RecordedRequest[] = []
  const arrivals: Deferred<RecordedRequest>[] = []
  const arrival = (index: number): Deferred<RecordedRequest> => (arrivals[index] ??= deferred())

  const server = createServer((req, res) => {
    void handle(req, res)
  })

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const chunks: Buffer[] = []
    for await (const chunk of req) chunks.push(chunk as Buffer)
    const text = Buffer.concat(chunks).toString('utf8')
    const gone = deferred<void>()
    res.on('close', () => {
      if (!res.writableEnded) gone.resolve()
    })
    const recorded: RecordedRequest = {
      method: req.method ?? '',
      path: req.url ?? '',
      headers: req.headers,
      body: parseJson(text),
      abandoned: gone.promise,
    }
    const index = requests.push(recorded) - 1
    arrival(index).resolve(recorded)

    let reply: ScriptedReply
    if (req.method !== wire.method || req.url !== wire.path) {
      reply = wire.error(404, `no route for ${req.method} ${req.url}`)
    } else {
      reply =
        wire.authenticate(req.headers) ??
        script.shift() ??
        withHeaders(wire.error(500, 'fake server: no scripted reply left'), { 'x-should-retry': 'false' })
    }
    if (reply.kind === 'hang') return
    res.writeHead(reply.status, {
      'content-type': 'application/json',
      ...wire.responseHeaders(),
      ...reply.headers,
    })
    res.end(JSON.stringify(reply.body))
  }

  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const { port } = server.address() as AddressInfo
  return {
    origin: `http://127.0.0.1:${port}`,
    requests,
    reply: (...replies) => void script.push(...replies),
    requestAt: (index) => arrival(index).promise,
    close: () =>
      new Promise<void>((resolve, reject) => {
        server.close((err) => (err ? reject(err) : resolve()))
        server.closeAllConnections()
      }),
  }
}

/** The same reply with extra response headers (e.g. `retry-after-ms`, `x-should-retry`). */
export function withHeaders(reply: ScriptedReply, headers: Record<string, string>): ScriptedReply {
  return reply.kind === 'json' ? { ...reply, headers: { ...reply.headers, ...headers } } : reply
}

/** A reply that never comes. */
export const hang: ScriptedReply = { kind: 'hang' }

function parseJson(text: string): unknown {
  if (!text) return undefined
  try {
    return JSON.parse(text) as unknown
  } catch {
    return undefined
  }
}
