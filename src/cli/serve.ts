import { serve } from '@hono/node-server'
import { WebSocketServer } from 'ws'
import { readFileSync } from 'node:fs'
import { createServer as createHttpsServer } from 'node:https'
import type { AddressInfo } from 'node:net'
import { setTimeout as sleep } from 'node:timers/promises'
import type { LoadedConfig } from '../config/load.js'
import { AppError } from '../errors.js'
import { openDashboardQueues } from '../http/admin.js'
import { createApp } from '../http/app.js'
import { Keyring } from '../http/keyring.js'
import { McpEndpoint } from '../http/mcp.js'
import { chooseProtocol } from '../http/ws-protocols.js'
import type { McpShellProfile } from '../http/mcp-schemas.js'
import { redactUrl } from '../redis/index.js'
import { createRuntime } from '../runtime/create-runtime.js'
import { noNetworkVariant } from '../runtime/build-providers.js'
import { e2bCommandPolicy } from '../services/e2b/policy.js'
import { e2bStatsHooks } from '../services/e2b/metrics.js'
import { e2bPauseHooks } from '../services/e2b/pause.js'
import type { Runtime, RuntimeOptions } from '../runtime/create-runtime.js'
import { describeNetwork } from '../egress/policy.js'
import { egressSupport } from '../egress/providers.js'
import { DOCKER_PROVIDER_ID } from '../../providers/docker/index.js'
import { engineViews } from '../fleet/engine-gateways.js'

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
    {
      toolCalls: runtime.toolCalls,
      sessions: runtime.sessions,
      processes: runtime.processes,
      code: runtime.code,
      logger: runtime.logger,
    },
    {
      providerId: config.routing.shell.providerId,
      profile: config.routing.shell.profile,
      ...shellProfileOf(runtime),
      idleTtlMs: config.server.mcpSessionIdleMs,
      origin: {
        listenHost: opts.host ?? config.server.host,
        ...(config.server.allowedHosts ? { allowedHosts: config.server.allowedHosts } : {}),
        ...(config.server.allowedOrigins ? { allowedOrigins: config.server.allowedOrigins } : {}),
      },
    },
  )
  // The Bull Board dashboard shows BullMQ queues: only the `bullmq` driver has any (exec jobs and agent
  // runs); under `redis`, as in embedded mode, there is no dashboard (docs/deploy.md).
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
    snapshots: runtime.snapshots,
    ...(runtime.streams ? { streams: runtime.streams } : {}),
    processes: runtime.processes,
    code: runtime.code,
    agentRuns: runtime.agentRuns,
    serviceEvents: runtime.serviceEvents,
    mcp,
    ...(dashboard ? { admin: { queues: dashboard.queues } } : {}),
    providers: async (view) =>
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
              network: describeNetwork(pr.network),
              runtime: pr.runtime,
              defaultTimeoutMs: pr.defaultTimeoutMs,
              maxTimeoutMs: pr.maxTimeoutMs,
            }))
          const runtimes = p.runtimes ? await p.runtimes().catch(() => undefined) : undefined
          const engines =
            id === DOCKER_PROVIDER_ID && runtime.engines
              ? (await engineViews(runtime.engines)).map(({ gatewayUrls, ...e }) => ({
                  id: e.id,
                  state: e.state,
                  draining: e.draining,
                  running: e.running,
                  ...(e.cap === undefined ? {} : { cap: e.cap }),
                  ...(e.memoryBytes === undefined
                    ? {}
                    : { memoryBytes: e.memoryBytes, memoryStrict: e.memoryStrict === true }),
                  ...(e.reservedBytes === undefined ? {} : { reservedBytes: e.reservedBytes }),
                  seenAt: e.seenAt,
                  ...(e.reason === undefined ? {} : { reason: e.reason }),
                  gateways: gatewayUrls.length,
                  ...(view?.admin === true ? { gatewayUrls } : {}),
                }))
              : undefined
          return {
            id,
            health,
            circuit: await runtime.breaker.state(id),
            egress: egressSupport(id),
            workspaces: {
              persistent: p.workspaces !== undefined,
              snapshots: p.snapshots !== undefined,
              fork: p.snapshots !== undefined,
            },
            profiles,
            ...(runtimes ? { runtimes } : {}),
            ...(engines ? { engines } : {}),
          }
        }),
      ),
    policies: () =>
      runtime.policies.names().flatMap((name) => {
        const p = runtime.policies.get(name)
        return p ? [{ name, mode: p.mode, candidates: p.candidates.map(({ resolved: _r, ...c }) => c) }] : []
      }),
    readiness: () => runtime.readiness(),
    metrics: (scope) => runtime.metrics.text(scope),
    e2b: {
      templates: config.e2b.templates,
      ...(config.e2b.domain ? { domain: config.e2b.domain } : {}),
      providerOf: (profile) => runtime.registry.profile(profile).provider,
      cwdOf: (profile) => runtime.registry.profile(profile).cwd,
      networkOf: (profile) => {
        const { network } = runtime.registry.profile(profile)
        return typeof network === 'string' ? network : 'allowlist'
      },
      noNetworkProfileOf: (profile) =>
        runtime.registry.profileNames().includes(noNetworkVariant(profile))
          ? noNetworkVariant(profile)
          : undefined,
      state: runtime.e2bState,
      ...e2bPauseHooks(runtime),
      ...e2bStatsHooks(runtime),
      policy: (tenant, sandboxId, command) =>
        e2bCommandPolicy(runtime.chains.toolCall, tenant, sandboxId, command),
    },
    ...(runtime.requestLimiter ? { requestLimiter: runtime.requestLimiter } : {}),
    limits: {
      bodyLimitBytes: config.server.bodyLimitBytes,
      fileLimitBytes: config.server.fileLimitBytes,
      requestsPerSecond: config.quotas.requestsPerSecond,
      sseKeepAliveMs: config.server.sseKeepAliveMs,
    },
    ...(opts.version ? { version: opts.version } : {}),
  })
  const host = opts.host ?? config.server.host
  // WebSockets (terminals, ports): upgrades go through the app like any request (auth, routes).
  const wss = new WebSocketServer({
    noServer: true,
    handleProtocols: chooseProtocol,
    maxPayload: 16 * 1024 * 1024,
  })
  const tls = config.server.tls ? readTls(config.server.tls) : undefined
  const server = await new Promise<ReturnType<typeof serve>>((resolve, reject) => {
    const common = {
      fetch: app.fetch,
      port: opts.port ?? config.server.port,
      hostname: host,
      websocket: { server: wss },
    }
    const timeouts = requestTimeouts(config.server.requestTimeoutMs)
    const s = tls
      ? serve({ ...common, createServer: createHttpsServer, serverOptions: { ...timeouts, ...tls } }, () =>
          resolve(s),
        )
      : serve({ ...common, serverOptions: timeouts }, () => resolve(s))
    s.once('error', reject)
  })
  const port = (server.address() as AddressInfo).port
  return {
    url: `${tls ? 'https' : 'http'}://${host.includes(':') ? `[${host}]` : host}:${port}`,
    port,
    async close() {
      await mcp.close()
      const closed = new Promise<void>((resolve) => server.close(() => resolve()))
      // Open SSE streams would hold the server open: end every connection.
      if ('closeAllConnections' in server) server.closeAllConnections()
      // Upgraded sockets are no longer the server's connections: close them (terminals end with them).
      for (const ws of wss.clients) ws.terminate()
      await closed
      await dashboard?.close()
    },
  }
}

/**
 * The routed shell profile as MCP describes it: timeouts, output cap, network, and the shell `bash`
 * calls get (the profile's `shell`, else persistent where the provider has persistent shells, as
 * the worker decides). Absent when the profile does not resolve: the call will say so.
 */
function shellProfileOf(runtime: Runtime): { shellProfile?: McpShellProfile } {
  const { shell } = runtime.loaded.config.routing
  try {
    const p = runtime.registry.profile(shell.profile, shell.providerId)
    const persistent = providerHasPersistentShells(runtime, shell.providerId)
    return {
      shellProfile: {
        name: p.name,
        defaultTimeoutMs: p.defaultTimeoutMs,
        maxTimeoutMs: p.maxTimeoutMs,
        network: describeNetwork(p.network),
        outputCapBytes: p.outputCapBytes,
        ...(p.shell === 'fresh' || persistent === false
          ? { shell: 'fresh' as const }
          : persistent
            ? { shell: 'persistent' as const }
            : {}),
      },
    }
  } catch {
    return {}
  }
}

/** Whether the provider's sandboxes have persistent shells; undefined when this process does not hold the provider. */
function providerHasPersistentShells(runtime: Runtime, providerId: string): boolean | undefined {
  try {
    return runtime.registry.get(providerId).persistentShells === true
  } catch {
    return undefined
  }
}

/** The PEM certificate and key of `server.tls`; CONFIG_INVALID naming the file that cannot be read. */
function readTls(tls: { certFile: string; keyFile: string }): { cert: Buffer; key: Buffer } {
  const read = (file: string, what: string): Buffer => {
    try {
      return readFileSync(file)
    } catch (err) {
      throw new AppError(
        'CONFIG_INVALID',
        `server.tls.${what}: cannot read ${file} (${(err as NodeJS.ErrnoException).code ?? String(err)}); ` +
          'give the PEM file of the certificate (certFile) and of its key (keyFile)',
        { cause: err },
      )
    }
  }
  return { cert: read(tls.certFile, 'certFile'), key: read(tls.keyFile, 'keyFile') }
}

/**
 * Node's bounds on receiving a request: headers and body within `requestTimeoutMs` (408, then the
 * connection closes), checked every second or more often. Node's defaults leave a trickled body open
 * for 300 s. Only an incomplete request is timed, so long answers (`wait=true`, SSE) are not cut.
 */
function requestTimeouts(requestTimeoutMs: number): {
  requestTimeout: number
  headersTimeout: number
  connectionsCheckingInterval: number
} {
  return {
    requestTimeout: requestTimeoutMs,
    headersTimeout: requestTimeoutMs,
    connectionsCheckingInterval: Math.min(1_000, Math.max(50, Math.floor(requestTimeoutMs / 10))),
  }
}

/** One failed start-up attempt, reported before the pause that follows it. */
export interface StartupRetry {
  /** 1 for the first attempt. */
  readonly attempt: number
  /** The pause before the next attempt (ms). */
  readonly delayMs: number
  /** Time since the first attempt (ms). */
  readonly elapsedMs: number
  /** Why the attempt failed (QUEUE_UNAVAILABLE, naming the Redis URL). */
  readonly error: AppError
}

/** Options of {@link createRuntimeWithRetry}. */
export interface StartupRetryOptions {
  /** Keep trying this long (ms) before giving up; 0 tries once. */
  readonly waitMs: number
  /** First pause between attempts, doubled after each (ms). @default 500 */
  readonly initialDelayMs?: number
  /** Longest pause between attempts (ms). @default 5000 */
  readonly maxDelayMs?: number
  /** Told about each failed attempt before its pause (the CLI prints a line). */
  readonly onRetry?: (retry: StartupRetry) => void
  /** Stops waiting (rejects with the last error). */
  readonly signal?: AbortSignal
}

/**
 * {@link createRuntime} for the long-running commands (`sbx serve`, `sbx api`, `sbx worker`): while
 * Redis is unreachable at start-up (QUEUE_UNAVAILABLE) it tries again with exponential backoff, for up
 * to `waitMs`, so a process started before Redis waits for it instead of crash-looping. Then it rejects
 * with QUEUE_UNAVAILABLE naming the URL and how long it waited. Every other error fails at once.
 */
export async function createRuntimeWithRetry(
  loaded: LoadedConfig,
  opts: RuntimeOptions,
  retry: StartupRetryOptions,
): Promise<Runtime> {
  const t0 = Date.now()
  let delayMs = retry.initialDelayMs ?? 500
  const maxDelayMs = retry.maxDelayMs ?? 5_000
  const giveUp = (err: AppError, attempt: number, why: string): AppError =>
    new AppError(
      'QUEUE_UNAVAILABLE',
      `gave up waiting for Redis at ${redactUrl(loaded.config.queue.redisUrl)} ${why} ` +
        `(${attempt} attempt${attempt === 1 ? '' : 's'} in ${Math.round((Date.now() - t0) / 1000)} s): ${err.message}`,
      { retryable: true, cause: err },
    )
  for (let attempt = 1; ; attempt++) {
    try {
      return await createRuntime(loaded, opts)
    } catch (err) {
      if (!(err instanceof AppError && err.code === 'QUEUE_UNAVAILABLE')) throw err
      const elapsedMs = Date.now() - t0
      const leftMs = retry.waitMs - elapsedMs
      if (leftMs <= 0) throw giveUp(err, attempt, `after the ${Math.round(retry.waitMs / 1000)} s allowed`)
      const pause = Math.min(delayMs, maxDelayMs, leftMs)
      retry.onRetry?.({ attempt, delayMs: pause, elapsedMs, error: err })
      await sleep(pause, undefined, retry.signal ? { signal: retry.signal } : {}).catch(() => undefined)
      if (retry.signal?.aborted) throw giveUp(err, attempt, 'when asked to stop')
      delayMs = Math.min(delayMs * 2, maxDelayMs)
    }
  }
}
