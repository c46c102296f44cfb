import type { Socket } from 'node:net'
import type { Duplex } from 'node:stream'
import type { SSEStreamingApi } from 'hono/streaming'
import { AppError } from '../../errors.js'

/**
 * A stream into a sandbox as the `net.Socket` Node's HTTP client and `ws` expect from a
 * `createConnection`: they call a few socket-only methods (timeouts, Nagle, keep-alive), which mean
 * nothing on a stream of the agent channel.
 */
export function asSocket(stream: Duplex): Socket {
  const s = stream as Duplex &
    Partial<Record<'setTimeout' | 'setNoDelay' | 'setKeepAlive' | 'ref' | 'unref', unknown>>
  const self = (): Duplex => stream
  s.setTimeout ??= self
  s.setNoDelay ??= self
  s.setKeepAlive ??= self
  s.ref ??= self
  s.unref ??= self
  return s as unknown as Socket
}

/** Ports and terminals in a process that holds no sandbox engine (`sbx api` of a fleet). */
export function streamsUnavailable(what: 'ports' | 'terminals'): AppError {
  return new AppError(
    'UNSUPPORTED',
    `${what} need the sandbox's channel in the process that answers the request: run the service as ` +
      '`sbx serve` (embedded), or send this request to an `sbx serve` of the fleet; `sbx api` forwards ' +
      'commands to workers but does not relay streams',
  )
}

/**
 * Calls `onTimeout` unless `opened()` is called within `ms`: a WebSocket handshake that never
 * completes must not keep a sandbox stream open.
 */
export function openDeadline(ms: number, onTimeout: () => void): { opened(): void } {
  const timer = setTimeout(onTimeout, ms)
  timer.unref()
  return { opened: () => clearTimeout(timer) }
}

/**
 * Sends `: keepalive` (an SSE comment, which clients ignore) on `stream` whenever `ms` pass without
 * anything written through the returned `wrote()`; stops when the stream is aborted or `stop()` is
 * called. Proxies between client and service then do not close a quiet stream.
 */
export function sseKeepAlive(stream: SSEStreamingApi, ms = 15_000): { wrote(): void; stop(): void } {
  let last = Date.now()
  const timer = setInterval(
    () => {
      if (Date.now() - last < ms) return
      last = Date.now()
      stream.write(': keepalive\n\n').catch(() => undefined)
    },
    Math.max(50, Math.floor(ms / 4)),
  )
  timer.unref()
  const stop = (): void => clearInterval(timer)
  stream.onAbort(stop)
  return { wrote: () => (last = Date.now()), stop }
}
