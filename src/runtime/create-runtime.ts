import type { LoadedConfig } from '../config/load.js'
import { isFleet } from '../config/schema.js'
import type { InterceptorChains } from '../extensions/compose.js'
import type { ServiceEventLog } from '../lifecycle/service-events.js'
import type { Logger } from '../logger.js'
import { createLogger } from '../logger.js'
import type { Metrics } from '../metrics.js'
import type { EngineDirectory } from '../queue/engines/engine-directory.js'
import type { JobQueue } from '../queue/types.js'
import type { CircuitBreaker } from '../routing/circuit-breaker.js'
import type { RoutePolicies } from '../routing/policies.js'
import type { QueueRouteExecutor } from '../routing/queue-route-executor.js'
import type { ProviderRegistry } from '../sandbox/registry.js'
import type { SandboxHealth } from '../sandbox/types.js'
import type { SandboxSessionPool } from '../sessions/pool.js'
import { startExecWorker } from '../worker/exec-worker.js'
import type { ExecWorkerHandle } from '../worker/exec-worker.js'
import type { E2BState } from '../services/e2b/state.js'
import type { AgentRunWorkerHandle } from '../worker/agent-run-worker.js'
import type { AgentRunService } from '../services/agent-runs/service.js'
import { buildAgents } from './build-agents.js'
import { buildChains } from './build-chains.js'
import { buildMetrics, countAgentRun, countEgress, countExecJob } from './build-metrics.js'
import { buildProviders } from './build-providers.js'
import { buildQueue } from './build-queue.js'
import { buildRouting } from './build-routing.js'
import { buildServices, sweepFailedSnapshots } from './build-services.js'
import type { Services } from './build-services.js'
import { buildPool, buildStores } from './build-state.js'
import { Cleanups } from './cleanups.js'
import { keyspace } from '../redis/keyspace.js'
import { FleetRateLimiter } from '../services/fleet-rate-limit.js'
import type { RequestLimiter } from '../services/rate-limit.js'
import { connectStoreRedis } from './store-redis.js'
import { engineIdOf } from './engine-side.js'
import { readinessOf } from './readiness.js'
import { assertProfileRuntimes } from './runtime-check.js'
import type { SessionDirectory } from '../services/session-directory.js'
import type { WorkersCheck } from '../worker/worker-census.js'

/** Which parts of the service this process runs. */
export type RuntimeRole = 'all' | 'api' | 'worker'

/** Options of {@link createRuntime}. */
export interface RuntimeOptions {
  /** `all`: API + exec worker in one process (embedded default); `api`; `worker`. @default 'all' */
  role?: RuntimeRole
  logger?: Logger
  /** Exec jobs at once in this process's worker. @default config.queue.concurrency */
  concurrency?: number
  /** Overrides `config.queue.prefix` (tests isolate with a unique prefix). */
  prefix?: string
  /** Run agent runs in this process (fleet: consume `sbx-agent-runs`). @default role === 'all' */
  agentWorker?: boolean
  /** Agent runs at once in this process's agent-run worker. @default 4 */
  agentConcurrency?: number
  /** Run an exec worker in this process (`sbx worker --agent` runs none). @default role !== 'api' */
  execWorker?: boolean
  /** Environment for model API keys. @default process.env */
  env?: Readonly<Record<string, string | undefined>>
  /** The URL of this worker's gateway (`fleet.gateway`), reported in its engine's heartbeat. */
  gatewayUrl?: string
  /** Session pool tuning passed through (tests shorten intervals). */
  pool?: { reapIntervalMs?: number; maintenanceIntervalMs?: number; acquireTimeoutMs?: number }
}

/** Everything a process of the service holds, wired from one config: its {@link Services} and more. */
export interface Runtime extends Services {
  readonly loaded: LoadedConfig
  /** The engine this process's exec worker reaches (`queue.engineRouting`). */
  readonly engineId?: string
  /** The fleet's engines (`queue.engineRouting`). */
  readonly engines?: EngineDirectory
  /** The Redis key prefix in use (config `queue.prefix` unless overridden). */
  readonly prefix: string
  readonly logger: Logger
  readonly registry: ProviderRegistry
  readonly pool: SandboxSessionPool
  /** The configured routing policies (config `routing.policies`). */
  readonly policies: RoutePolicies
  /** Per-provider circuits (shared through Redis in fleet mode). */
  readonly breaker: CircuitBreaker
  /** The service's lifecycle events (circuit transitions), for `GET /v1/events`. */
  readonly serviceEvents: ServiceEventLog
  readonly queue: JobQueue
  readonly router: QueueRouteExecutor
  readonly chains: InterceptorChains
  readonly directory: SessionDirectory
  /** The E2B endpoint's sandbox records (Redis in fleet mode: every API replica sees them). */
  readonly e2bState: E2BState
  readonly metrics: Metrics
  readonly worker?: ExecWorkerHandle
  /** The agent-run consumer of this process (fleet mode with `agentWorker`). */
  readonly agentWorker?: AgentRunWorkerHandle
  readonly agentRuns: AgentRunService
  /** Admits a tenant's requests (`quotas.requestsPerSecond`) for the whole fleet; absent: per process. */
  readonly requestLimiter?: RequestLimiter
  /** Named readiness checks: queue/redis, each provider, and (fleet) the connected `workers`. */
  readiness(): Promise<Record<string, SandboxHealth | WorkersCheck>>
  /** Graceful shutdown: the worker drains within `deadlineMs`, then everything closes. */
  close(opts?: { deadlineMs?: number }): Promise<void>
}

/**
 * The composition root: builds providers, the session pool (memory or Redis store), the job queue
 * (in-process or BullMQ), the router, the server's interceptor chain (config policy + extensions), an
 * exec worker (roles `all` and `worker`) and the services the HTTP API calls. Each builder registers
 * how to close what it opened, so a start that fails half-way closes exactly that.
 */
export async function createRuntime(loaded: LoadedConfig, opts: RuntimeOptions = {}): Promise<Runtime> {
  const { config } = loaded
  const role = opts.role ?? 'all'
  const logger = opts.logger ?? createLogger()
  const prefix = opts.prefix ?? config.queue.prefix
  const fleet = isFleet(config)
  const env = opts.env ?? process.env

  const { registry, egressProxy, countEgress: countEgressWith } = buildProviders(loaded, env, logger)
  const cleanups = new Cleanups()
  cleanups.add(() => egressProxy.closeAll())
  // The exec worker drains before the other steps close; a start that fails after it began closes it.
  let startedWorker: ExecWorkerHandle | undefined
  try {
    await assertProfileRuntimes(registry, logger)
    const redis = fleet ? await connectStoreRedis(config.queue.redisUrl, `sbx-store:${prefix}`) : undefined
    if (redis) cleanups.add(() => redis.quit().catch(() => redis.disconnect()))
    const runsExecWorker = opts.execWorker ?? role !== 'api'
    const engineRouting = fleet && config.queue.engineRouting === true
    const engineId = engineRouting && runsExecWorker ? await engineIdOf(registry, config) : undefined
    const stores = buildStores(redis, prefix)
    const pool = buildPool({ config, registry, redis, prefix, engineId, tuning: opts.pool, logger }, cleanups)
    const { queue, engines } = await buildQueue(config, registry, prefix, engineId, cleanups, opts.gatewayUrl)
    const { serviceEvents } = stores
    const routing = buildRouting({ config, registry, pool, queue, redis, prefix, serviceEvents, logger })
    const chains = await buildChains(config, routing.lifecycle)
    const services = buildServices({
      config,
      role,
      stores,
      pool,
      registry,
      queue,
      routing,
      chains,
      ...(engines ? { engines } : {}),
      ...(engineId === undefined ? {} : { engineId }),
    })
    const metrics = buildMetrics({ queue, engines, registry, breaker: routing.breaker, pool })
    countEgressWith(countEgress(metrics))

    const worker = runsExecWorker
      ? await startExecWorker({
          queue,
          pool: routing.routed,
          concurrency: opts.concurrency ?? config.queue.concurrency,
          onError: (err, context) => logger.warn({ err, context }, 'exec worker error'),
          onJob: countExecJob(metrics),
        })
      : undefined
    startedWorker = worker
    const agents = await buildAgents(
      {
        config,
        redis,
        prefix,
        consume: opts.agentWorker ?? role === 'all',
        concurrency: opts.agentConcurrency,
        env,
        chains,
        router: routing.router,
        processes: services.processes,
        code: services.code,
        directory: stores.directory,
        engines,
        onFinished: countAgentRun(metrics),
        onError: (err, context) => logger.warn({ err, context }, 'agent-run worker error'),
      },
      cleanups,
    )
    // Snapshots a crash left `creating` are swept on the pool's reap interval (0: never).
    sweepFailedSnapshots(services.snapshots, opts.pool?.reapIntervalMs ?? 60_000, logger, cleanups)

    return {
      ...(engineId === undefined ? {} : { engineId }),
      ...(engines ? { engines } : {}),
      agentRuns: agents.agentRuns,
      prefix,
      loaded,
      logger,
      registry,
      pool,
      policies: routing.policies,
      breaker: routing.breaker,
      serviceEvents,
      queue,
      router: routing.router,
      chains,
      directory: stores.directory,
      e2bState: stores.e2bState,
      ...services,
      metrics,
      ...(worker ? { worker } : {}),
      ...(agents.agentWorker ? { agentWorker: agents.agentWorker } : {}),
      ...(redis
        ? {
            requestLimiter: new FleetRateLimiter(
              redis,
              keyspace(prefix).rates,
              config.quotas.requestsPerSecond,
            ),
          }
        : {}),
      readiness: readinessOf({
        redis: redis ? { client: redis, url: config.queue.redisUrl } : undefined,
        queue,
        registry,
        census: agents.census,
      }),
      async close({ deadlineMs = 30_000 } = {}) {
        await worker?.close({ deadlineMs })
        await cleanups.run((err) => logger.warn({ err }, 'close failed'))
        await registry.close()
      },
    }
  } catch (err) {
    await startedWorker?.close({ deadlineMs: 5_000 }).catch(() => undefined)
    await cleanups.run(() => undefined)
    await registry.close().catch(() => undefined)
    throw err
  }
}
