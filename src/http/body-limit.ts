import { bodyLimit } from 'hono/body-limit'
import type { Env, MiddlewareHandler } from 'hono'

/**
 * Refuses a request body over `maxSize` bytes with `onTooLarge()`'s error. A body framed by
 * `Content-Length` (no `Transfer-Encoding`: Node's parser then delivers exactly that many bytes) and
 * a request with neither (no body) are judged by their headers alone, so the body stays on the
 * connection for the route's own read, straight off the socket. Only a chunked body is counted as it
 * streams in, by Hono's `bodyLimit` (which builds the web `Request` to read it: about a tenth of a
 * routed command's CPU in the API process when every request went that way, bench/http-throughput.ts).
 */
export function limitBody<E extends Env>(maxSize: number, onTooLarge: () => never): MiddlewareHandler<E> {
  const chunked = bodyLimit({ maxSize, onError: onTooLarge })
  return (c, next) => {
    if (c.req.header('transfer-encoding') !== undefined) return chunked(c, next)
    const length = c.req.header('content-length')
    if (length !== undefined && Number.parseInt(length, 10) > maxSize) onTooLarge()
    return next()
  }
}
