import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import type { Keyring } from '../http/keyring.js'
import type { Metrics } from '../metrics.js'

/** Options of {@link startMetricsServer}. */
export interface MetricsServerOptions {
  /** TCP port; 0 picks a free one. */
  port: number
  /** Interface to listen on. @default '127.0.0.1' */
  host?: string
}

/** A running metrics endpoint. */
export interface MetricsServer {
  /** `http://host:port` */
  readonly url: string
  close(): Promise<void>
}

const json = (code: string, message: string): string => JSON.stringify({ error: { code, message } })

/**
 * `GET /metrics` of a process without the HTTP API (`sbx worker --metrics-port`): the Prometheus
 * text of this process's series (exec latency, agent runs and tokens live where the work runs), with
 * the API's key rules — a bearer key is required; an admin key reads every series, any other key
 * only its own tenant's.
 */
export async function startMetricsServer(
  metrics: Pick<Metrics, 'text'>,
  keyring: Keyring,
  opts: MetricsServerOptions,
): Promise<MetricsServer> {
  const server = createServer((req, res) => {
    const path = (req.url ?? '/').split('?')[0]
    if (req.method !== 'GET' || path !== '/metrics') {
      res.writeHead(404, { 'content-type': 'application/json' })
      res.end(json('NOT_FOUND', 'this port serves only GET /metrics'))
      return
    }
    const token = /^Bearer\s+(\S+)\s*$/i.exec(req.headers.authorization ?? '')?.[1]
    const principal = token ? keyring.verify(token) : undefined
    if (!principal) {
      res.writeHead(401, { 'content-type': 'application/json' })
      res.end(
        json(
          'UNAUTHORIZED',
          token
            ? 'unknown API key: the bearer token matches no configured key; send a key from apiKeys (or SBX_API_KEY)'
            : 'missing bearer token: send "Authorization: Bearer <api key>" (the API\'s keys; an admin key reads every series)',
        ),
      )
      return
    }
    metrics
      .text(principal.admin ? undefined : { tenant: principal.tenant })
      .then((text) => {
        res.writeHead(200, { 'content-type': 'text/plain; version=0.0.4' })
        res.end(text)
      })
      .catch((err: unknown) => {
        res.writeHead(500, { 'content-type': 'application/json' })
        res.end(json('INTERNAL', `metrics could not be read: ${(err as Error).message}`))
      })
  })
  const host = opts.host ?? '127.0.0.1'
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject)
    server.listen(opts.port, host, () => resolve())
  })
  const { port } = server.address() as AddressInfo
  return {
    url: `http://${host.includes(':') ? `[${host}]` : host}:${port}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections()
        server.close(() => resolve())
      }),
  }
}
