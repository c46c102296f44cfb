/*
 * A loopback HTTP proxy that adds `Authorization: Bearer <key>` to every request and passes
 * everything else through unchanged (method, path, Host, Origin, body, streamed answers such as SSE),
 * for clients that cannot send a header (the MCP conformance suite's CLI).
 */
import { createServer, request } from 'node:http'
import type { AddressInfo } from 'node:net'

/** A running {@link startBearerProxy}. */
export interface BearerProxy {
  /** `http://127.0.0.1:<port>`: send requests here instead of to the target. */
  readonly url: string
  close(): Promise<void>
}

/**
 * Listens on a free loopback port and forwards each request to `target` (`http://host:port`) with
 * the bearer key added (a request that already has an `Authorization` header keeps it).
 */
export async function startBearerProxy(target: string, key: string): Promise<BearerProxy> {
  const to = new URL(target)
  const server = createServer((req, res) => {
    const headers = { ...req.headers }
    headers['authorization'] ??= `Bearer ${key}`
    const upstream = request(
      { host: to.hostname, port: to.port, method: req.method, path: req.url, headers },
      (answer) => {
        res.writeHead(answer.statusCode ?? 502, answer.headers)
        answer.pipe(res)
      },
    )
    upstream.on('error', (err) => {
      if (!res.headersSent) res.writeHead(502, { 'content-type': 'text/plain' })
      res.end(`bearer proxy: ${err.message}`)
    })
    // A client that goes away mid-answer (an SSE stream it closes) ends the upstream request too.
    res.on('close', () => upstream.destroy())
    req.pipe(upstream)
  })
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject)
    server.listen(0, '127.0.0.1', () => resolve())
  })
  const { port } = server.address() as AddressInfo
  return {
    url: `http://127.0.0.1:${port}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections()
        server.close(() => resolve())
      }),
  }
}
