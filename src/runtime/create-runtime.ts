import { randomUUID } from 'node:crypto'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { EgressProxy, type EgressAuditEvent } from '../egress/proxy.js'
import { assertEgressEnforceable, egressCaps } from '../egress/providers.js'
import { Redis } from 'ioredis'
import { createDockerProvider, DOCKER_PROVIDER_ID } from '../../providers/docker/index.js'
import type { LoadedConfig } from '../config/load.js'
import { AppError } from '../errors.js'
import { composeInterceptors } from '../extensions/compose.js'
import type { InterceptorChains } from '../extensions/compose.js'
import { ExtensionRegistry } from '../extensions/registry.js'
import { routeShellTools } from '../interceptors/builtins/route-shell-tools.js'
import { routeCodeTools } from '../interceptors/builtins/route-code-tools.js'
import { secretScanner } from '../interceptors/builtins/secret-scanner.js'
import type { ToolCallInterceptor } from '../interceptors/types.js'
import type { Logger } from '../logger.js'
import { createLogger } from '../logger.js'
import { Metrics } from '../metrics.js'
import { reconnectDelayMs, redactUrl } from '../queue/bullmq/redis-clients.js'
import { createJobQueue } from '../queue/create-job-queue.js'
import { createEngineJobQueue } from '../queue/engines/engine-queue.js'
import type { EngineJobQueue } from '../queue/engines/engine-queue.js'
import type { EngineDirectory } from '../queue/engines/engine-directory.js'
import { engineIdOf, engineSide, sandboxMemoryEstimate } from './engine-side.js'
import type { JobQueue } from '../queue/types.js'
import { QueueRouteExecutor } from '../routing/queue-route-executor.js'
import { ProviderRegistry } from '../sandbox/registry.js'
import { LABELS } from '../sandbox/types.js'
import type { SandboxHealth } from '../sandbox/types.js'
import { createSessionPool } from '../sessions/pool.js'
import { MemoryCircuitBreaker, RedisCircuitBreaker } from '../routing/circuit-breaker.js'
import type { CircuitBreaker, CircuitTransition } from '../routing/circuit-breaker.js'
import { circuitEvent } from '../routing/circuit-events.js'
import { LifecycleDispatcher } from '../lifecycle/dispatcher.js'
import { MemoryServiceEventLog, RedisServiceEventLog } from '../lifecycle/service-events.js'
import type { ServiceEventLog } from '../lifecycle/service-events.js'
import { policyAwareTargets, RoutePolicies } from '../routing/policies.js'
import { PolicyPool } from '../routing/policy-pool.js'
import type { SandboxSessionPool } from '../sessions/pool.js'
import { MemorySessionStore } from '../sessions/store/memory.js'
import { RedisSessionStore } from '../sessions/store/redis.js'
import { startExecWorker } from '../worker/exec-worker.js'
import type { ExecWorkerHandle } from '../worker/exec-worker.js'
import { dockerOptionsOf } from './docker-options.js'
import { assertProfileRuntimes } from './runtime-check.js'
import { QueueExecService } from './exec-service.js'
import { createRemoteProviders } from './remote-providers.js'
import { MemorySessionDirectory, RedisSessionDirectory, ensureSessionRecord } from './session-directory.js'
import type { SessionDirectory } from './session-directory.js'
import { MemoryE2BState, RedisE2BState } from '../http/e2b/state.js'
import type { E2BState } from '../http/e2b/state.js'
import { PooledSessionService } from './session-service.js'
import { MemorySnapshotDirectory, RedisSnapshotDirectory } from './snapshot-directory.js'
import { PooledSnapshotService } from './snapshot-service.js'
import { PooledSessionStreams } from './session-streams.js'
import type { SessionStreamService } from './session-streams.js'
import { PooledProcessService } from './process-service.js'
import { PooledCodeService } from './code-service.js'
import { ChainToolCallService } from './tool-call-service.js'
import { TenantJobLimiter } from './tenant-jobs.js'
import type { AgentRunDeps } from './agent-runs/execute.js'
import { MemoryAgentRunStore } from './agent-runs/memory-store.js'
import { modelFor } from './agent-runs/models.js'
import { RedisAgentRunStore } from './agent-runs/redis-store.js'
import {
  createBullmqAgentDispatcher,
  createInProcessAgentRunner,
  startBullmqAgentWorker,
} from './agent-runs/runners.js'
import type { AgentRunWorkerHandle } from './agent-runs/runners.js'
import { AgentRunService } from './agent-runs/service.js'
import type { AgentRunDispatcher } from './agent-runs/service.js'
import { createWorkerCensus, EXEC_QUEUE } from './worker-census.js'
import { laneName } from '../queue/engines/engine-directory.js'
import type { WorkersCheck } from './worker-census.js'
import { engineServices } from './engine-services.js'
import type { GatewayTarget } from '../fleet/gateway.js'

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

/** Everything a process of the service holds, wired from one config. */
export interface Runtime {
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
  readonly exec: QueueExecService
  readonly sessions: PooledSessionService
  /** Snapshots and forks of sessions (docs/workspaces.md). */
  readonly snapshots: PooledSnapshotService
  /**
   * Ports and terminals of sessions; absent for role `api`, whose process relays no streams (its
   * sandboxes are the workers' business), unless engine routing sends ports to the engines' gateways.
   */
  readonly streams?: SessionStreamService
  /** Background processes of sessions' sandboxes. */
  readonly processes: PooledProcessService
  /** The code interpreter of sessions' sandboxes (`POST /v1/sessions/{id}/code`). */
  readonly code: PooledCodeService
  readonly toolCalls: ChainToolCallService
  /** What this worker's gateway serves (`queue.engineRouting` with an exec worker). */
  readonly gateway?: GatewayTarget
  readonly metrics: Metrics
  readonly worker?: ExecWorkerHandle
  /** The agent-run consumer of this process (fleet mode with `agentWorker`). */
  readonly agentWorker?: AgentRunWorkerHandle
  readonly agentRuns: AgentRunService
  /** Named readiness checks: queue/redis, each provider, and (fleet) the connected `workers`. */
  readiness(): Promise<Record<string, SandboxHealth | WorkersCheck>>
  /** Graceful shutdown: the worker drains within `deadlineMs`, then everything closes. */
  close(opts?: { deadlineMs?: number }): Promise<void>
}

/**
 * The composition root: builds providers, the session pool (memory or Redis store), the job queue
 * (in-process or BullMQ), the router, the server's interceptor chain (config policy + extensions), an
 * exec worker (roles `all` and `worker`) and the services the HTTP API calls.
 */
export async function createRuntime(loaded: LoadedConfig, opts: RuntimeOptions = {}): Promise<Runtime> {
  const { config } = loaded
  const role = opts.role ?? 'all'
  const logger = opts.logger ?? createLogger()
  const prefix = opts.prefix ?? config.queue.prefix
  const fleet = config.queue.driver === 'bullmq'

  const registry = new ProviderRegistry()
  // Audits land in the log now and in the metrics once they exist (below).
  let countEgress: ((e: EgressAuditEvent) => void) | undefined
  const egressProxy = new EgressProxy({
    ...(config.egress.upstreamCaFile ? { upstreamCaFile: config.egress.upstreamCaFile } : {}),
    onAudit: (e) => {
      logger.info({ egress: e }, `egress ${e.verdict} ${e.destination}`)
      countEgress?.(e)
    },
  })
  if (config.providers.docker.enabled) {
    const dockerOptions = dockerOptionsOf(config.providers.docker.host)
    const { idleExitSlackMs, agentBinary } = config.providers.docker
    registry.register(
      createDockerProvider({
        ...(dockerOptions ? { dockerOptions } : {}),
        ...(idleExitSlackMs !== undefined ? { idleExitSlackMs } : {}),
        ...(agentBinary !== undefined ? { agentBinary } : {}),
        egress: {
          proxy: egressProxy,
          socketDir: config.egress.socketDir ?? join(tmpdir(), `sbx-egress-${process.getuid?.() ?? 'user'}`),
          tenantCaps: egressCaps(config.egress.tenants),
        },
      }),
    )
  }
  for (const remote of createRemoteProviders(config.providers, opts.env ?? process.env))
    registry.register(remote)
  for (const [name, p] of loaded.profiles) {
    assertEgressEnforceable(name, p.provider, p.network, egressCaps(config.egress.tenants))
    const { name: _n, ...input } = p
    registry.addProfile(name, input)
  }

  const cleanups: (() => Promise<unknown>)[] = [() => egressProxy.closeAll()]
  try {
    await assertProfileRuntimes(registry, logger)
    let redis: Redis | undefined
    if (fleet) {
      // Sessions, the session directory and agent runs. While Redis is away a command waits for one
      // reconnect attempt (about a second), then fails: the API answers 503 instead of hanging.
      redis = new Redis(config.queue.redisUrl, {
        lazyConnect: true,
        maxRetriesPerRequest: 1,
        connectTimeout: 5_000,
        retryStrategy: reconnectDelayMs,
      })
      // Connection trouble surfaces through the commands and readiness(); ioredis reconnects by itself.
      let socketError: Error | undefined
      redis.on('error', (err: Error) => (socketError = err))
      try {
        await redis.connect()
      } catch (err) {
        // Stop the client's own reconnect loop: a caller retrying start-up must not pile up clients.
        redis.disconnect()
        // The socket's error (e.g. ECONNREFUSED) says more than connect()'s "Connection is closed.".
        const why = socketError ?? (err as Error)
        throw new AppError(
          'QUEUE_UNAVAILABLE',
          `cannot reach Redis at ${redactUrl(config.queue.redisUrl)}: ${why.message}; start Redis or fix REDIS_URL`,
          { cause: why, retryable: true },
        )
      }
      const r = redis
      cleanups.push(() => r.quit().catch(() => r.disconnect()))
    }
    const runsExecWorker = opts.execWorker ?? role !== 'api'
    const engineRouting = fleet && config.queue.engineRouting === true
    const engineId = engineRouting && runsExecWorker ? await engineIdOf(registry, config) : undefined
    const store = redis
      ? new RedisSessionStore({ redis, prefix: `${prefix}:sessions:` })
      : new MemorySessionStore()
    const instanceId = `${prefix}-${randomUUID().slice(0, 8)}`
    const pool = createSessionPool({
      providers: registry,
      store,
      scope: prefix,
      instanceId,
      maxSandboxesPerTenant: config.quotas.maxSandboxes,
      maxSandboxesPerProvider:
        config.providers.docker.maxSandboxes === undefined
          ? {}
          : { [DOCKER_PROVIDER_ID]: config.providers.docker.maxSandboxes },
      ...(engineId === undefined ? {} : { providerEngines: { [DOCKER_PROVIDER_ID]: engineId } }),
      ...(opts.pool ?? {}),
      onError: (err, context) => logger.warn({ err, context }, 'session pool background error'),
    })
    cleanups.push(async () => {
      await pool.shutdown({ destroyIdle: true })
      // Embedded mode keeps bindings in memory: they die with this process, so its sandboxes go too
      // (a fleet's bindings live in Redis and outlive any one process).
      if (!fleet) await destroyInstanceSandboxes(registry, instanceId)
    })

    const queue = engineRouting
      ? await createEngineJobQueue({
          redisUrl: config.queue.redisUrl,
          prefix,
          ...(engineId === undefined
            ? {}
            : { engine: engineSide(registry, engineId, prefix, config, opts.gatewayUrl) }),
          memoryOf: (job) => sandboxMemoryEstimate(registry, job.providerId, job.profile),
        })
      : await createJobQueue(
          fleet ? { driver: 'bullmq', redisUrl: config.queue.redisUrl, prefix } : { driver: 'in-process' },
        )
    cleanups.push(() => queue.close())
    // Routing policies resolve like providers: the router builds their jobs with limits every
    // candidate honours, and the pool below picks the candidate (pinned per session).
    const policies = new RoutePolicies(config.routing.policies, registry, registry.providerIds())
    const targets = policyAwareTargets(registry, policies)
    // Circuit transitions: told once fleet-wide (by the process whose call made them) to the log, the
    // service's event stream (GET /v1/events) and the extensions' lifecycle hooks.
    const serviceEvents: ServiceEventLog = redis
      ? new RedisServiceEventLog(redis, prefix)
      : new MemoryServiceEventLog()
    let lifecycle: LifecycleDispatcher | undefined
    const onTransition = (t: CircuitTransition): void => {
      const line = `circuit of provider '${t.provider}' ${t.from} → ${t.to}: ${t.reason}`
      if (t.to === 'open') logger.warn({ circuit: t }, line)
      else logger.info({ circuit: t }, line)
      const event = circuitEvent(t)
      void serviceEvents
        .append(event)
        .catch((err: unknown) => logger.warn({ err }, 'circuit event not recorded'))
      void lifecycle?.emit(event)
    }
    const breaker: CircuitBreaker = redis
      ? new RedisCircuitBreaker(redis, prefix, config.routing.circuit, onTransition)
      : new MemoryCircuitBreaker(config.routing.circuit, Date.now, onTransition)
    const routed = new PolicyPool(pool, policies, breaker)
    const router = new QueueRouteExecutor({ queue, targets, tenantRoutes: config.routing.tenants })

    const extensions = config.extensions.length
      ? (await ExtensionRegistry.of().load(config.extensions)).snapshot()
      : undefined
    const host: ToolCallInterceptor[] = [
      routeShellTools({ providerId: config.routing.shell.providerId, profile: config.routing.shell.profile }),
    ]
    const codeRouting = config.routing.code
    if (codeRouting)
      host.push(
        routeCodeTools({
          providerId: codeRouting.providerId,
          profile: codeRouting.profile,
          language: codeRouting.language,
          ...(codeRouting.tools ? { tools: codeRouting.tools } : {}),
        }),
      )
    if (config.routing.secretScanner !== 'off')
      host.push(secretScanner({ action: config.routing.secretScanner }))
    const chains = composeInterceptors({ toolCall: host }, extensions)
    if (chains.lifecycleHooks.length > 0) lifecycle = new LifecycleDispatcher(chains.lifecycleHooks)

    const directory: SessionDirectory = redis
      ? new RedisSessionDirectory(redis, `${prefix}:`)
      : new MemorySessionDirectory()
    const e2bState: E2BState = redis ? new RedisE2BState(redis, `${prefix}:e2b:`) : new MemoryE2BState()
    const engines = 'engines' in queue ? (queue as EngineJobQueue).engines : undefined
    const localSessions = new PooledSessionService(directory, routed, targets, config.routing.tenants)
    const metrics = new Metrics({
      queueDepth: () => queue.counts(),
      ...(engines ? { engines: () => engines.list() } : {}),
      circuits: async () =>
        Object.fromEntries(
          await Promise.all(
            registry.providerIds().map(async (id) => [id, (await breaker.state(id)).state] as const),
          ),
        ),
      pool: () => {
        const s = pool.stats()
        const idle = Object.values(s.current.warm).reduce((a, b) => a + b, 0)
        return {
          hits: s.hits,
          misses: s.misses,
          creates: s.creates,
          reaped: s.reaped,
          leases: s.current.leases,
          handles: s.current.handles,
          idle,
        }
      },
    })
    countEgress = (e) => metrics.egressDecisions.inc({ tenant: e.tenant, verdict: e.verdict })

    let worker: ExecWorkerHandle | undefined
    if (runsExecWorker) {
      worker = await startExecWorker({
        queue,
        pool: routed,
        concurrency: opts.concurrency ?? config.queue.concurrency,
        onError: (err, context) => logger.warn({ err, context }, 'exec worker error'),
        onJob: (e) => {
          if (e.type !== 'end') return
          const outcome = e.result?.status ?? 'error'
          metrics.execLatency.observe(
            { provider: e.job.providerId, profile: e.job.profile, outcome },
            e.durationMs / 1000,
          )
        },
      })
    }

    const env = opts.env ?? process.env
    const agentStore = redis ? new RedisAgentRunStore(redis, `${prefix}:`) : new MemoryAgentRunStore()
    cleanups.push(() => agentStore.close())
    // With engine routing, a session's files, processes and code are served beside its engine.
    const { sessions, processes, code, streams, gateway } = engineServices(
      { ...(engines ? { engines } : {}), directory, registry, config, ...(engineId ? { engineId } : {}) },
      {
        sessions: localSessions,
        processes: new PooledProcessService(directory, pool, {
          maxRunning: config.quotas.maxProcessesPerSession,
          outputBufferBytes: config.quotas.processOutputBytes,
        }),
        code: new PooledCodeService(directory, pool, (r) => registry.profile(r.profile, r.provider)),
        ...(role === 'api' ? {} : { streams: new PooledSessionStreams(directory, routed) }),
      },
    )
    const agentDeps: AgentRunDeps = {
      store: agentStore,
      chains,
      router,
      processes,
      code,
      model: (name) => modelFor(config, name, env),
      onFinished: (r) => {
        metrics.agentRuns.inc({ tenant: r.tenant, finish_reason: r.finishReason ?? r.state })
        if (r.usage) {
          metrics.agentTokens.inc({ tenant: r.tenant, kind: 'input' }, r.usage.inputTokens)
          metrics.agentTokens.inc({ tenant: r.tenant, kind: 'output' }, r.usage.outputTokens)
        }
      },
    }
    let dispatcher: AgentRunDispatcher
    let agentConsumer: AgentRunWorkerHandle | undefined
    const census = fleet
      ? createWorkerCensus(
          config.queue.redisUrl,
          prefix,
          1_000,
          engines
            ? async () =>
                (await engines.list())
                  .filter((e) => e.state === 'live')
                  .map((e) => laneName(EXEC_QUEUE, e.id))
            : undefined,
        )
      : undefined
    if (census) cleanups.push(() => census.close())
    const agentWorker = opts.agentWorker ?? role === 'all'
    if (!fleet) {
      const inProcess = await createInProcessAgentRunner(agentDeps)
      dispatcher = inProcess
      cleanups.push(() => inProcess.close())
    } else {
      const producer = createBullmqAgentDispatcher(config.queue.redisUrl, prefix, census)
      dispatcher = producer
      cleanups.push(() => producer.close())
      if (agentWorker) {
        const consumer = await startBullmqAgentWorker(
          agentDeps,
          config.queue.redisUrl,
          prefix,
          opts.agentConcurrency,
        )
        agentConsumer = consumer
        cleanups.push(() => consumer.close())
      }
    }
    const agentRuns = new AgentRunService(
      agentStore,
      dispatcher,
      (input) => void agentDeps.model(input.model),
      (tenant, input) =>
        ensureSessionRecord(directory, tenant, input.sessionId, {
          provider: config.routing.shell.providerId,
          profile: config.routing.shell.profile,
        }),
    )

    const snapshots = new PooledSnapshotService({
      sessions,
      directory,
      snapshots: redis ? new RedisSnapshotDirectory(redis, `${prefix}:`) : new MemorySnapshotDirectory(),
      pool,
      providers: registry,
      maxSnapshots: config.quotas.maxSnapshots,
    })
    // Snapshots a crash left `creating` are swept on the pool's reap interval (0: never).
    const sweepMs = opts.pool?.reapIntervalMs ?? 60_000
    if (sweepMs > 0) {
      const sweeping = setInterval(() => {
        snapshots
          .sweepFailed()
          .catch((err: unknown) => logger.warn({ err }, 'sweeping failed snapshots failed'))
      }, sweepMs)
      sweeping.unref()
      cleanups.push(async () => clearInterval(sweeping))
    }

    const runtime: Runtime = {
      ...(engineId === undefined ? {} : { engineId }),
      ...(engines ? { engines } : {}),
      agentRuns,
      prefix,
      loaded,
      logger,
      registry,
      pool,
      policies,
      breaker,
      serviceEvents,
      queue,
      router,
      chains,
      directory,
      e2bState,
      exec: new QueueExecService(
        queue,
        router,
        directory,
        new TenantJobLimiter(config.quotas.maxConcurrentJobs),
        routed,
      ),
      sessions,
      snapshots,
      ...(streams ? { streams } : {}),
      processes,
      code,
      toolCalls: new ChainToolCallService(chains, router, directory),
      ...(gateway ? { gateway } : {}),
      metrics,
      ...(worker ? { worker } : {}),
      ...(agentConsumer ? { agentWorker: agentConsumer } : {}),
      async readiness() {
        const checks: Record<string, SandboxHealth | WorkersCheck> = {}
        if (redis) checks['redis'] = await redisHealth(redis, config.queue.redisUrl)
        checks['queue'] = await queue
          .counts()
          .then(() => ({ ok: true }))
          .catch((err: unknown) => ({ ok: false, reason: (err as Error).message }))
        for (const id of registry.providerIds()) {
          const p = registry.get(id)
          checks[id] = p.health
            ? await p.health().catch((err: unknown) => ({ ok: false, reason: (err as Error).message }))
            : { ok: true }
        }
        // Who consumes the queues (informational: the API is ready without workers, jobs wait).
        if (census && checks['redis']?.ok) {
          const workers = await census.check().catch(() => undefined)
          if (workers) checks['workers'] = workers
        }
        return checks
      },
      async close({ deadlineMs = 30_000 } = {}) {
        await worker?.close({ deadlineMs })
        for (const c of cleanups.reverse())
          await c().catch((err: unknown) => logger.warn({ err }, 'close failed'))
        await registry.close()
      },
    }
    return runtime
  } catch (err) {
    for (const c of cleanups.reverse()) await c().catch(() => undefined)
    await registry.close().catch(() => undefined)
    throw err
  }
}

/** Destroys every sandbox this process's pool created (by its instance label), on every provider. */
async function destroyInstanceSandboxes(registry: ProviderRegistry, instanceId: string): Promise<void> {
  for (const id of registry.providerIds()) {
    const provider = registry.get(id)
    const refs = await provider.list({ labels: { [LABELS.instance]: instanceId } }).catch(() => [])
    await Promise.allSettled(refs.map((ref) => provider.destroy(ref)))
    // Its session and snapshot records die with it too: so do their workspaces and snapshots.
    await provider.workspaces?.dropAll({ [LABELS.instance]: instanceId }).catch(() => undefined)
  }
}

/** Whether Redis answers PING (fails at once while the client is reconnecting). */
async function redisHealth(redis: Redis, url: string): Promise<SandboxHealth> {
  const down = (why: string): SandboxHealth => ({
    ok: false,
    reason: `Redis at ${redactUrl(url)} is unreachable (${why}); jobs cannot be queued until it is back`,
  })
  if (redis.status !== 'ready') return down(`connection ${redis.status}`)
  let timer: NodeJS.Timeout | undefined
  try {
    await Promise.race([
      redis.ping(),
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error('no answer to PING within 2 s')), 2_000)
      }),
    ])
    return { ok: true }
  } catch (err) {
    return down((err as Error).message)
  } finally {
    clearTimeout(timer)
  }
}
