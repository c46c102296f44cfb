import { request as httpRequest } from 'node:http'
import type { IncomingMessage } from 'node:http'
import type { Duplex } from 'node:stream'
import { AppError } from '../errors.js'
import { decodeFrame, encodeFrame } from './codec.js'
import type { SandboxTerminal } from '../sandbox/types.js'
import { tunnelledTerminal } from './terminal-tunnel.js'
import {
  COLS_HEADER,
  ENGINE_HEADER,
  GATEWAY_PATH,
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
  encodeTerminalOptions,
} from './protocol.js'
import type { GatewayAnswer, GatewayCall, TerminalTunnelOptions } from './protocol.js'

/**
 * The call never reached a worker of the engine (nobody listened, or a worker of another engine
 * answered): safe to send again once the engine's record says where to.
 */
export class GatewayMissed extends Error {
  override readonly name = 'GatewayMissed'
}

const UNSENT = new Set(['ECONNREFUSED', 'ENOTFOUND', 'EHOSTUNREACH', 'ENETUNREACH', 'EAI_AGAIN'])
/** Calls that may run twice with the same effect. */
const REPEATABLE = new Set([
  'sessions.readFile',
  'sessions.writeFile',
  'processes.list',
  'processes.get',
  'processes.read',
])

/**
 * Sends one call to the gateway at `url` (a worker of `engineId`) and returns its value, or throws
 * the error the worker's service threw (same code, message and retryable flag). Throws
 * {@link GatewayMissed} when the call was not delivered, `UNAVAILABLE` when the worker went away
 * while it ran.
 */
export async function callGateway(
  url: string,
  secret: string,
  engineId: string,
  call: GatewayCall,
  signal?: AbortSignal,
): Promise<unknown> {
  let res: Response
  try {
    res = await fetch(url + GATEWAY_PATH, {
      method: 'POST',
      headers: {
        [SECRET_HEADER]: secret,
        [ENGINE_HEADER]: engineId,
        'content-type': 'application/octet-stream',
      },
      body: encodeFrame(call),
      ...(signal ? { signal } : {}),
    })
  } catch (err) {
    if (signal?.aborted) throw err
    const code = String((err as { cause?: { code?: unknown } }).cause?.code ?? '')
    // Nobody listened; or a kept-alive connection the worker closed (it went away) failed a call that
    // may safely run again.
    if (UNSENT.has(code) || (code === 'UND_ERR_SOCKET' && REPEATABLE.has(`${call.service}.${call.method}`)))
      throw new GatewayMissed(`no worker of engine ${engineId} at ${url} (${code})`)
    throw gone(engineId, err)
  }
  let answer: GatewayAnswer
  try {
    answer = decodeFrame(new Uint8Array(await res.arrayBuffer())) as GatewayAnswer
  } catch (err) {
    if (signal?.aborted) throw err
    throw gone(engineId, err)
  }
  if (res.status === 409)
    throw new GatewayMissed(`the worker at ${url} serves another engine than ${engineId}`)
  if (answer.ok) return answer.value
  if (res.status === 401)
    throw new AppError(
      'UNAVAILABLE',
      `the gateway of engine ${engineId} refused this API's fleet secret: set the same fleet.secret ` +
        '(SBX_FLEET_SECRET) on every sbx api and sbx worker',
    )
  throw new AppError(answer.error.code, answer.error.message, { retryable: answer.error.retryable })
}

function gone(engineId: string, err: unknown): AppError {
  return new AppError(
    'UNAVAILABLE',
    `the worker of Docker engine ${engineId} serving this call went away while it ran (it may have run ` +
      'partly); retry: the session is served by another worker of its engine, or moves once the engine is down',
    { retryable: true, cause: err },
  )
}

/**
 * Opens a raw stream to `port` in the sandbox of tenant's session, through the port tunnel of the
 * gateway at `url` (a worker of `engineId`): the ports route relays HTTP and WebSockets over it as it
 * does over a local port stream. Throws as {@link callGateway} does.
 */
export async function openGatewayPort(
  url: string,
  secret: string,
  engineId: string,
  target: { tenant: string; sessionId: string; port: number },
  signal?: AbortSignal,
): Promise<Duplex> {
  const { socket } = await openTunnel(
    url,
    secret,
    engineId,
    PORT_PATH,
    PORT_UPGRADE,
    {
      [TENANT_HEADER]: target.tenant,
      [SESSION_HEADER]: target.sessionId,
      [PORT_HEADER]: String(target.port),
    },
    signal,
  )
  return socket
}

/** The longest encoded terminal options a tunnel's request head carries. */
const MAX_TERMINAL_OPTIONS_CHARS = 12 * 1024

/**
 * Opens a terminal of `cols` × `rows` in the sandbox of tenant's session, through the terminal
 * tunnel of the gateway at `url` (a worker of `engineId`): a {@link SandboxTerminal} whose bytes,
 * window sizes and exit travel framed over the tunnel (terminal-tunnel.ts). `options` (what it
 * runs, its environment and directory) travel in a header. Throws as {@link callGateway} does.
 */
export async function openGatewayTerminal(
  url: string,
  secret: string,
  engineId: string,
  target: { tenant: string; sessionId: string; cols: number; rows: number },
  signal?: AbortSignal,
  options: TerminalTunnelOptions = {},
): Promise<SandboxTerminal> {
  const encoded = encodeTerminalOptions(options)
  // Node refuses a request head over 16 KiB: say so here rather than as a broken tunnel.
  if (encoded !== undefined && encoded.length > MAX_TERMINAL_OPTIONS_CHARS)
    throw new AppError(
      'BAD_REQUEST',
      `the terminal's command, environment and directory take ${encoded.length} characters encoded, ` +
        `over the ${MAX_TERMINAL_OPTIONS_CHARS} a fleet terminal tunnel carries; pass fewer or shorter environment variables`,
    )
  const { socket, res } = await openTunnel(
    url,
    secret,
    engineId,
    TERMINAL_PATH,
    TERMINAL_UPGRADE,
    {
      [TENANT_HEADER]: target.tenant,
      [SESSION_HEADER]: target.sessionId,
      [COLS_HEADER]: String(target.cols),
      [ROWS_HEADER]: String(target.rows),
      ...(encoded === undefined ? {} : { [TERMINAL_OPTIONS_HEADER]: encoded }),
    },
    signal,
  )
  return tunnelledTerminal(socket, Number(res.headers[PID_HEADER]) || 0)
}

/** An HTTP upgrade to one of the gateway's tunnels: the socket after the 101, and the 101 itself. */
function openTunnel(
  url: string,
  secret: string,
  engineId: string,
  path: string,
  upgrade: string,
  headers: Record<string, string>,
  signal?: AbortSignal,
): Promise<{ socket: Duplex; res: IncomingMessage }> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(new URL(path, url), {
      method: 'GET',
      headers: {
        connection: 'Upgrade',
        upgrade,
        [SECRET_HEADER]: secret,
        [ENGINE_HEADER]: engineId,
        ...headers,
      },
      ...(signal ? { signal } : {}),
    })
    req.once('upgrade', (res: IncomingMessage, socket: Duplex, head: Buffer) => {
      if (head.byteLength > 0) socket.unshift(head)
      resolve({ socket, res })
    })
    req.once('response', (res: IncomingMessage) => {
      const chunks: Buffer[] = []
      res.on('data', (c: Buffer) => chunks.push(c))
      res.once('end', () => {
        if (res.statusCode === 409)
          return reject(new GatewayMissed(`the worker at ${url} serves another engine than ${engineId}`))
        if (res.statusCode === 401)
          return reject(
            new AppError(
              'UNAVAILABLE',
              `the gateway of engine ${engineId} refused this API's fleet secret: set the same fleet.secret ` +
                '(SBX_FLEET_SECRET) on every sbx api and sbx worker',
            ),
          )
        try {
          const answer = decodeFrame(Buffer.concat(chunks)) as GatewayAnswer
          if (answer.ok) return reject(gone(engineId, new Error('the gateway answered without a tunnel')))
          reject(new AppError(answer.error.code, answer.error.message, { retryable: answer.error.retryable }))
        } catch (err) {
          reject(gone(engineId, err))
        }
      })
    })
    req.once('error', (err: NodeJS.ErrnoException) => {
      if (signal?.aborted) return reject(err)
      // Nothing reached the sandbox before the 101: safe to open again.
      reject(
        UNSENT.has(String(err.code)) || err.code === 'ECONNRESET'
          ? new GatewayMissed(`no worker of engine ${engineId} at ${url} (${err.code})`)
          : gone(engineId, err),
      )
    })
    req.end()
  })
}
