import { connect as netConnect } from 'node:net'
import type { Socket } from 'node:net'
import { connect as tlsConnect } from 'node:tls'
import { AppError } from '../errors.js'
import type { PortPreview, PortStream } from './types.js'

/** What {@link connectPreview} needs to reach one port through a provider's preview proxy. */
export interface PreviewTarget {
  /** The provider's preview URL of the port (`https://8000-<id>.e2b.app`, Daytona's `url`). */
  url: string
  /**
   * Where to open the connection instead of the URL's own host (one origin for every preview host,
   * which is then only named by the `Host` header: proxies, local fakes). Its path is ignored.
   */
  connectTo?: string
  /** Headers the proxy wants (the provider's token). */
  headers: Record<string, string>
  /** See {@link PortPreview.unreachable}. */
  unreachable(body: string): boolean
  /** Provider name for messages (`Daytona`, `E2B`). */
  provider: string
}

/** Time allowed to open the connection (and TLS) to a preview proxy (ms). */
const CONNECT_TIMEOUT_MS = 15_000

/**
 * Opens a TCP (or TLS, for `https:`) connection to a provider's preview proxy and describes, as
 * `preview`, how requests on it must be addressed. The caller speaks HTTP/1.1 (or a WebSocket
 * upgrade) on it. Rejects with `UNAVAILABLE` when the proxy cannot be reached.
 */
export async function connectPreview(
  target: PreviewTarget,
  opts: { signal?: AbortSignal } = {},
): Promise<PortStream> {
  let url: URL
  let via: URL
  try {
    url = new URL(target.url)
    via = new URL(target.connectTo ?? target.url)
  } catch {
    throw new AppError('UNAVAILABLE', `${target.provider} gave a preview URL that is not a URL`)
  }
  const secure = via.protocol === 'https:'
  const port = Number(via.port || (secure ? 443 : 80))
  const hostname = via.hostname.replace(/^\[|\]$/g, '')
  const socket: Socket = secure
    ? tlsConnect({ host: hostname, port, servername: url.hostname, ALPNProtocols: ['http/1.1'] })
    : netConnect({ host: hostname, port })
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(
      () => fail(new Error(`no connection within ${CONNECT_TIMEOUT_MS} ms`)),
      CONNECT_TIMEOUT_MS,
    )
    const onAbort = (): void => fail(new Error('the request was aborted'))
    const done = (): void => {
      clearTimeout(timer)
      opts.signal?.removeEventListener('abort', onAbort)
    }
    function fail(err: Error): void {
      done()
      socket.destroy()
      reject(
        new AppError(
          'UNAVAILABLE',
          `cannot reach ${target.provider}'s preview proxy at ${via.host} (${err.message}); check the provider's preview settings and network`,
          { cause: err },
        ),
      )
    }
    if (opts.signal?.aborted) return fail(new Error('the request was aborted'))
    opts.signal?.addEventListener('abort', onAbort, { once: true })
    socket.once(secure ? 'secureConnect' : 'connect', () => {
      socket.off('error', fail)
      done()
      resolve()
    })
    socket.once('error', fail)
  })
  const preview: PortPreview = {
    host: url.host,
    basePath: url.pathname.replace(/\/+$/, ''),
    headers: target.headers,
    unreachable: target.unreachable,
  }
  return Object.assign(socket, { preview })
}

/**
 * Reads a JSON object from a proxy's error body; undefined when it is not one. Used by the
 * providers' `unreachable` checks.
 */
export function jsonObject(body: string): Record<string, unknown> | undefined {
  try {
    const v = JSON.parse(body) as unknown
    return typeof v === 'object' && v !== null && !Array.isArray(v)
      ? (v as Record<string, unknown>)
      : undefined
  } catch {
    return undefined
  }
}
