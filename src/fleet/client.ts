import { request as httpRequest } from 'node:http'
import type { IncomingMessage } from 'node:http'
import type { Duplex } from 'node:stream'
import { AppError } from '../errors.js'
import { decodeFrame, encodeFrame } from './codec.js'
import {
  ENGINE_HEADER,
  GATEWAY_PATH,
  PORT_HEADER,
  PORT_PATH,
  PORT_UPGRADE,
  SECRET_HEADER,
  SESSION_HEADER,
  TENANT_HEADER,
} from './protocol.js'
import type { GatewayAnswer, GatewayCall } from './protocol.js'

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
export function openGatewayPort(
  url: string,
  secret: string,
  engineId: string,
  target: { tenant: string; sessionId: string; port: number },
  signal?: AbortSignal,
): Promise<Duplex> {
  return new Promise<Duplex>((resolve, reject) => {
    const req = httpRequest(new URL(PORT_PATH, url), {
      method: 'GET',
      headers: {
        connection: 'Upgrade',
        upgrade: PORT_UPGRADE,
        [SECRET_HEADER]: secret,
        [ENGINE_HEADER]: engineId,
        [TENANT_HEADER]: target.tenant,
        [SESSION_HEADER]: target.sessionId,
        [PORT_HEADER]: String(target.port),
      },
      ...(signal ? { signal } : {}),
    })
    req.once('upgrade', (_res: IncomingMessage, socket: Duplex, head: Buffer) => {
      if (head.byteLength > 0) socket.unshift(head)
      resolve(socket)
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
