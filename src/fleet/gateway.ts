import { createServer } from 'node:http'
import type { IncomingMessage, Server, ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import { AppError } from '../errors.js'
import type { ErrorCode } from '../errors.js'
import type { Logger } from '../logger.js'
import type { Duplex } from 'node:stream'
import type {
  CodeService,
  ProcessService,
  SessionService,
  SessionStreamService,
  SnapshotService,
} from '../services/index.js'
import { decodeFrame, encodeFrame } from './codec.js'
import { serveTerminal } from './terminal-tunnel.js'
import {
  COLS_HEADER,
  ENGINE_HEADER,
  GATEWAY_PATH,
  GatewayCallSchema,
  PORT_HEADER,
  PORT_PATH,
  PORT_UPGRADE,
  PID_HEADER,
  ROWS_HEADER,
  SECRET_HEADER,
  SESSION_HEADER,
  TENANT_HEADER,
  TERMINAL_OPTIONS_HEADER,
  TERMINAL_PATH,
  TERMINAL_UPGRADE,
  decodeTerminalOptions,
  secretMatches,
} from './protocol.js'
import type { GatewayAnswer, GatewayCall } from './protocol.js'

/** What a worker's gateway serves: the worker's own (local, never forwarding) services. */
export interface GatewayTarget {
  readonly engineId: string
  readonly sessions: Pick<SessionService, 'readFile' | 'writeFile' | 'delete'>
  readonly processes: ProcessService
  readonly code: CodeService
  /** Snapshots taken, restored and removed on the worker's engine; absent: those calls answer 501. */
  readonly snapshots?: Pick<SnapshotService, 'create' | 'fork' | 'startSession' | 'delete'>
  /** Ports and terminals of the worker's sandboxes, for the tunnels; absent: they answer 501. */
  readonly streams?: Pick<SessionStreamService, 'openPort' | 'openTerminal'>
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
  server.on('upgrade', (req: IncomingMessage, socket: Duplex, head: Buffer) => {
    tunnel(req, socket, head).catch((err: unknown) => {
      opts.logger.warn({ err }, 'gateway port tunnel failed')
      socket.destroy()
    })
  })
  const refuse = (socket: Duplex, status: number, answer: GatewayAnswer): void => {
    const frame = encodeFrame(answer)
    socket.end(
      Buffer.concat([
        Buffer.from(
          `HTTP/1.1 ${status} Refused\r\ncontent-type: application/octet-stream\r\n` +
            `content-length: ${frame.byteLength}\r\nconnection: close\r\n\r\n`,
        ),
        frame,
      ]),
    )
  }
  /**
   * The port and terminal tunnels: after the 101, the socket carries the raw bytes of the sandbox's
   * port, or the frames of a terminal (terminal-tunnel.ts).
   */
  const tunnel = async (req: IncomingMessage, socket: Duplex, head: Buffer): Promise<void> => {
    socket.on('error', () => undefined)
    const fail = (status: number, code: ErrorCode, message: string, retryable = false): void =>
      refuse(socket, status, { ok: false, error: { code, message, retryable } })
    const upgrade = req.headers.upgrade?.toLowerCase()
    const kind =
      req.url === PORT_PATH && upgrade === PORT_UPGRADE
        ? 'port'
        : req.url === TERMINAL_PATH && upgrade === TERMINAL_UPGRADE
          ? 'terminal'
          : undefined
    if (!kind) return fail(404, 'NOT_FOUND', 'no such gateway call')
    if (!secretMatches(headerOf(req, SECRET_HEADER), opts.secret)) {
      opts.logger.warn(
        { from: req.socket.remoteAddress },
        'gateway: refused a tunnel without the fleet secret',
      )
      return fail(401, 'UNAUTHORIZED', 'the gateway needs the fleet secret')
    }
    if (!target) return fail(503, 'UNAVAILABLE', 'the worker is still starting; retry', true)
    if (headerOf(req, ENGINE_HEADER) !== target.engineId)
      return fail(409, 'CONFLICT', `this gateway serves engine ${target.engineId}`, true)
    const streams = target.streams
    if (!streams) return fail(501, 'UNSUPPORTED', 'this worker relays no ports or terminals')
    const tenant = headerOf(req, TENANT_HEADER)
    const session = headerOf(req, SESSION_HEADER)
    if (!tenant || !session) return fail(400, 'BAD_REQUEST', `malformed ${kind} tunnel`)
    const ac = new AbortController()
    socket.once('close', () => ac.abort())
    const opened = (extra = ''): void =>
      void socket.write(
        `HTTP/1.1 101 Switching Protocols\r\nupgrade: ${kind === 'port' ? PORT_UPGRADE : TERMINAL_UPGRADE}\r\n` +
          `connection: Upgrade\r\n${extra}\r\n`,
      )
    const refused = (err: unknown): void => {
      if (err instanceof AppError) return fail(200, err.code, err.message, err.retryable)
      throw err
    }
    if (kind === 'terminal') {
      const dim = (name: string): number => Number(headerOf(req, name))
      const cols = dim(COLS_HEADER)
      const rows = dim(ROWS_HEADER)
      const ok = (v: number): boolean => Number.isInteger(v) && v >= 1 && v <= 65_535
      const options = decodeTerminalOptions(headerOf(req, TERMINAL_OPTIONS_HEADER))
      if (!ok(cols) || !ok(rows) || !options) return fail(400, 'BAD_REQUEST', 'malformed terminal tunnel')
      let terminal: Awaited<ReturnType<typeof streams.openTerminal>>['terminal']
      try {
        terminal = (
          await streams.openTerminal(tenant, session, { ...options, cols, rows, signal: ac.signal })
        ).terminal
      } catch (err) {
        return refused(err)
      }
      if (ac.signal.aborted) return void terminal.close()
      opened(`${PID_HEADER}: ${terminal.pid}\r\n`)
      if (head.byteLength > 0) socket.unshift(head)
      return serveTerminal(socket, terminal)
    }
    const port = Number(headerOf(req, PORT_HEADER))
    if (!Number.isInteger(port) || port < 1 || port > 65_535)
      return fail(400, 'BAD_REQUEST', 'malformed port tunnel')
    let stream: Duplex
    try {
      stream = (await streams.openPort(tenant, session, port, { signal: ac.signal })).stream
    } catch (err) {
      return refused(err)
    }
    if (ac.signal.aborted) return void stream.destroy()
    opened()
    if (head.byteLength > 0) stream.write(head)
    stream.on('error', () => socket.destroy())
    socket.pipe(stream)
    stream.pipe(socket)
    socket.once('close', () => stream.destroy())
    stream.once('close', () => socket.destroy())
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
    case 'sessions.delete':
      return t.sessions.delete(tenant, session)
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
    case 'snapshots.create':
      return snapshotsOf(t).create(tenant, session, (a[2] ?? {}) as Parameters<SnapshotService['create']>[2])
    case 'snapshots.fork':
      return snapshotsOf(t).fork(tenant, session, a[2] as Parameters<SnapshotService['fork']>[2])
    case 'snapshots.startSession':
      // The id is the snapshot's; the rest of the input travels as the third argument.
      return snapshotsOf(t).startSession(tenant, {
        ...(a[2] as Omit<Parameters<SnapshotService['startSession']>[1], 'snapshot'>),
        snapshot: session,
      })
    case 'snapshots.delete':
      return snapshotsOf(t).delete(tenant, session)
    default:
      throw new AppError('BAD_REQUEST', `not a gateway call: ${call.service}.${call.method}`)
  }
}

function snapshotsOf(t: GatewayTarget): NonNullable<GatewayTarget['snapshots']> {
  if (!t.snapshots)
    throw new AppError(
      'UNSUPPORTED',
      `the worker of engine ${t.engineId} serves no snapshots through its gateway`,
    )
  return t.snapshots
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
