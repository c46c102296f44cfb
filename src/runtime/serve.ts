import { serve } from '@hono/node-server'
import type { AddressInfo } from 'node:net'
import { openDashboardQueues } from '../http/admin.js'
import { createApp } from '../http/app.js'
import { Keyring } from '../http/keyring.js'
import { McpEndpoint } from '../http/mcp.js'
import type { Runtime } from './create-runtime.js'

/** A listening HTTP server of the service. */
export interface RunningServer {
  readonly url: string
  readonly port: number
  close(): Promise<void>
}

/** Builds the app over a runtime and listens. `port: 0` picks a free port. */
export async function startServer(
  runtime: Runtime,
  opts: { keys: ConstructorParameters<typeof Keyring>[0]; port?: number; host?: string; version?: string },
): Promise<RunningServer> {
  const { config } = runtime.loaded
  const mcp = new McpEndpoint(
    { toolCalls: runtime.toolCalls, sessions: runtime.sessions, logger: runtime.logger },
    { providerId: config.routing.shell.providerId, profile: config.routing.shell.profile },
  )
  const dashboard =
    config.queue.driver === 'bullmq'
      ? await openDashboardQueues({ redisUrl: config.queue.redisUrl, prefix: runtime.prefix })
      : undefined
  const app = createApp({
    keyring: new Keyring(opts.keys),
    logger: runtime.logger,
    exec: runtime.exec,
    toolCalls: runtime.toolCalls,
    sessions: runtime.sessions,
    agentRuns: runtime.agentRuns,
    mcp,
    ...(dashboard ? { admin: { queues: dashboard.queues } } : {}),
    providers: async () =>
      Promise.all(
        runtime.registry.providerIds().map(async (id) => {
          const p = runtime.registry.get(id)
          const health = p.health
            ? await p.health().catch((err: unknown) => ({ ok: false, reason: (err as Error).message }))
            : { ok: true }
          const profiles = runtime.registry
            .profileNames()
            .map((n) => runtime.registry.profile(n))
            .filter((pr) => pr.provider === id)
            .map((pr) => ({
              name: pr.name,
              cpu: pr.cpu,
              memoryMb: pr.memoryMb,
              network: pr.network,
              defaultTimeoutMs: pr.defaultTimeoutMs,
              maxTimeoutMs: pr.maxTimeoutMs,
            }))
          return { id, health, profiles }
        }),
      ),
    readiness: () => runtime.readiness(),
    metrics: () => runtime.metrics.text(),
    limits: {
      bodyLimitBytes: config.server.bodyLimitBytes,
      fileLimitBytes: config.server.fileLimitBytes,
      requestsPerSecond: config.quotas.requestsPerSecond,
    },
    ...(opts.version ? { version: opts.version } : {}),
  })
  const host = opts.host ?? config.server.host
  const server = await new Promise<ReturnType<typeof serve>>((resolve, reject) => {
    const s = serve({ fetch: app.fetch, port: opts.port ?? config.server.port, hostname: host }, () =>
      resolve(s),
    )
    s.once('error', reject)
  })
  const port = (server.address() as AddressInfo).port
  return {
    url: `http://${host.includes(':') ? `[${host}]` : host}:${port}`,
    port,
    async close() {
      await mcp.close()
      const closed = new Promise<void>((resolve) => server.close(() => resolve()))
      // Open SSE streams would hold the server open: end every connection.
      if ('closeAllConnections' in server) server.closeAllConnections()
      await closed
      await dashboard?.close()
    },
  }
}
