import { createServer } from 'node:http'
import type { IncomingMessage, Server, ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import { AppError } from '../errors.js'
import type { Logger } from '../logger.js'
import type { CodeService, ProcessService, SessionService } from '../services/index.js'
import { decodeFrame, encodeFrame } from './codec.js'
import { ENGINE_HEADER, GATEWAY_PATH, GatewayCallSchema, SECRET_HEADER, secretMatches } from './protocol.js'
import type { GatewayAnswer, GatewayCall } from './protocol.js'

/** What a worker's gateway serves: the worker's own (local, never forwarding) services. */
export interface GatewayTarget {
  readonly engineId: string
  readonly sessions: Pick<SessionService, 'readFile' | 'writeFile'>
  readonly processes: ProcessService
  readonly code: CodeService
}

/** Options of {@link listenGateway}. */
export interface GatewayOptions {
  /** `fleet.secret`: every request must carry it. */
  readonly secret: string
  readonly host: string
  /** 0 picks a free port. */
  readonly port: number
  /** The URL API processes reach it at. @default `http://<host>:<port>` */
  readonly advertiseUrl?: string
  /** Largest request frame (bytes): the file limit plus room for the call. */
  readonly maxBodyBytes: number
  readonly logger: Logger
}

/** A listening gateway; it answers 503 until {@link Gateway.serve} gives it its services. */
export interface Gateway {
  /** Where API processes reach it (reported in the engine's heartbeat). */
  readonly url: string
  serve(target: GatewayTarget): void
  close(): Promise<void>
}

/**
 * A worker's internal gateway (docs/deploy.md, "Many Docker engines"): `POST /internal/v1/call`
 * runs one file, process or code call of a session with the worker's own services, for an API
 * process that does not reach the session's engine. Every request must carry the fleet secret
 * (constant-time compare) and name this worker's engine; the tenant travels as the call's first
 * argument, which only the secret authorises — the services then find the session by (tenant, id),
 * so a call never reaches another tenant's session. It listens before the worker starts, so the
 * first heartbeat already reports its URL.
 */
export async function listenGateway(opts: GatewayOptions): Promise<Gateway> {
  let target: GatewayTarget | undefined
  const server: Server = createServer((req, res) => {
    handle(req, res).catch((err: unknown) => {
      opts.logger.warn({ err }, 'gateway request failed')
      if (!res.headersSent) reply(res, 500, { ok: false, error: internal() })
      else res.destroy()
    })
  })
  const handle = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    if (req.method !== 'POST' || req.url !== GATEWAY_PATH) {
      req.resume()
      return reply(res, 404, {
        ok: false,
        error: { code: 'NOT_FOUND', message: 'no such gateway call', retryable: false },
      })
    }
    if (!secretMatches(headerOf(req, SECRET_HEADER), opts.secret)) {
      req.resume()
      opts.logger.warn({ from: req.socket.remoteAddress }, 'gateway: refused a call without the fleet secret')
      return reply(res, 401, {
        ok: false,
        error: {
          code: 'UNAUTHORIZED',
          message:
            'the gateway needs the fleet secret: set the same fleet.secret (SBX_FLEET_SECRET) on every sbx api and sbx worker',
          retryable: false,
        },
      })
    }
    if (!target) {
      req.resume()
      return reply(res, 503, {
        ok: false,
        error: { code: 'UNAVAILABLE', message: 'the worker is still starting; retry', retryable: true },
      })
    }
    const wanted = headerOf(req, ENGINE_HEADER)
    if (wanted !== target.engineId) {
      req.resume()
      return reply(res, 409, {
        ok: false,
        error: {
          code: 'CONFLICT',
          message: `this gateway serves engine ${target.engineId}, not ${wanted ?? '(none named)'}`,
          retryable: true,
        },
      })
    }
    const body = await readBody(req, opts.maxBodyBytes)
    if (!body) {
      return reply(res, 413, {
        ok: false,
        error: {
          code: 'PAYLOAD_TOO_LARGE',
          message: `gateway call over ${opts.maxBodyBytes} bytes`,
          retryable: false,
        },
      })
    }
    let call: GatewayCall
    try {
      call = GatewayCallSchema.parse(decodeFrame(body))
    } catch {
      return reply(res, 400, {
        ok: false,
        error: { code: 'BAD_REQUEST', message: 'malformed gateway call', retryable: false },
      })
    }
    // The caller went away (its client disconnected): stop a running cell.
    const ac = new AbortController()
    res.on('close', () => {
      if (!res.writableFinished) ac.abort()
    })
    try {
      const value = await dispatch(target, call, ac.signal)
      reply(res, 200, value === undefined ? { ok: true } : { ok: true, value })
    } catch (err) {
      if (err instanceof AppError)
        return reply(res, 200, {
          ok: false,
          error: { code: err.code, message: err.message, retryable: err.retryable },
        })
      opts.logger.warn({ err, service: call.service, method: call.method }, 'gateway call failed')
      reply(res, 200, { ok: false, error: internal() })
    }
  }
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject)
    server.listen(opts.port, opts.host, () => {
      server.off('error', reject)
      resolve()
    })
  })
  const { port } = server.address() as AddressInfo
  const host = opts.host.includes(':') ? `[${opts.host}]` : opts.host
  return {
    url: (opts.advertiseUrl ?? `http://${host}:${port}`).replace(/\/+$/, ''),
    serve(t) {
      target = t
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve())
        server.closeAllConnections()
      }),
  }
}

/** Runs one call on the worker's services (the schema allowed only the listed methods). */
function dispatch(t: GatewayTarget, call: GatewayCall, signal: AbortSignal): Promise<unknown> {
  const a = call.args as unknown[]
  const [tenant, session] = call.args
  switch (`${call.service}.${call.method}`) {
    case 'sessions.readFile':
      return t.sessions.readFile(tenant, session, a[2] as string)
    case 'sessions.writeFile':
      return t.sessions.writeFile(tenant, session, a[2] as string, a[3] as Uint8Array)
    case 'processes.start':
      return t.processes.start(tenant, session, a[2] as Parameters<ProcessService['start']>[2])
    case 'processes.list':
      return t.processes.list(tenant, session)
    case 'processes.get':
      return t.processes.get(tenant, session, a[2] as string)
    case 'processes.read':
      return t.processes.read(tenant, session, a[2] as string, a[3] as Parameters<ProcessService['read']>[3])
    case 'processes.writeStdin':
      return t.processes.writeStdin(tenant, session, a[2] as string, a[3] as Uint8Array, a[4] as boolean)
    case 'processes.signal':
      return t.processes.signal(tenant, session, a[2] as string, a[3] as string, a[4] as number)
    case 'processes.remove':
      return t.processes.remove(tenant, session, a[2] as string)
    case 'code.run':
      return t.code.run(tenant, session, a[2] as Parameters<CodeService['run']>[2], { signal })
    default:
      throw new AppError('BAD_REQUEST', `not a gateway call: ${call.service}.${call.method}`)
  }
}

function internal(): { code: 'INTERNAL'; message: string; retryable: false } {
  return {
    code: 'INTERNAL',
    message: "internal error in the session's worker; see its log",
    retryable: false,
  }
}

function headerOf(req: IncomingMessage, name: string): string | undefined {
  const v = req.headers[name]
  return Array.isArray(v) ? v[0] : v
}

function reply(res: ServerResponse, status: number, answer: GatewayAnswer): void {
  const frame = encodeFrame(answer)
  res.writeHead(status, { 'content-type': 'application/octet-stream', 'content-length': frame.byteLength })
  res.end(frame)
}

/** The whole body, or undefined past `max` bytes (the rest is drained). */
async function readBody(req: IncomingMessage, max: number): Promise<Buffer | undefined> {
  const chunks: Buffer[] = []
  let n = 0
  let over = false
  for await (const chunk of req as AsyncIterable<Buffer>) {
    n += chunk.byteLength
    if (n > max) over = true
    if (!over) chunks.push(chunk)
  }
  return over ? undefined : Buffer.concat(chunks)
}
