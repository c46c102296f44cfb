import type { Config } from '../config/index.js'
import type { InterceptorChains } from '../extensions/compose.js'
import type { Logger } from '../logger.js'
import type { EngineDirectory } from '../queue/engines/engine-directory.js'
import type { JobQueue } from '../queue/types.js'
import type { GatewayTarget } from '../fleet/gateway.js'
import type { ProviderRegistry } from '../sandbox/registry.js'
import type { SandboxSessionPool } from '../sessions/pool.js'
import type { Stores } from './build-state.js'
import type { Routing } from './build-routing.js'
import type { Cleanups } from './cleanups.js'
import { PooledCodeService } from '../services/code-service.js'
import type { RuntimeRole } from './create-runtime.js'
import { engineServices } from './engine-services.js'
import { QueueExecService } from '../services/exec-service.js'
import { PooledProcessService } from '../services/process-service.js'
import { PooledSessionService } from '../services/session-service.js'
import { PooledSessionStreams } from '../services/pooled-session-streams.js'
import type { SessionStreamService } from '../services/session-streams.js'
import { PooledSnapshotService } from '../services/snapshot-service.js'
import { TenantJobLimiter } from '../services/tenant-jobs.js'
import { ChainToolCallService } from '../services/tool-call-service.js'

/** The services the HTTP API calls (agent runs apart: see `build-agents.ts`). */
export interface Services {
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
}

/** What {@link buildServices} needs. */
export interface ServiceParts {
  readonly config: Config
  readonly role: RuntimeRole
  readonly stores: Stores
  readonly pool: SandboxSessionPool
  readonly registry: ProviderRegistry
  readonly queue: JobQueue
  readonly routing: Routing
  readonly chains: InterceptorChains
  /** The fleet's engines (`queue.engineRouting`). */
  readonly engines?: EngineDirectory
  /** The engine this process reaches (a worker with engine routing). */
  readonly engineId?: string
}

/** The services over the session directory, the pool (behind policies) and the router. Opens nothing. */
export function buildServices(p: ServiceParts): Services {
  const { config, stores, pool, registry, routing } = p
  const { directory } = stores
  const localSessions = new PooledSessionService(
    directory,
    routing.routed,
    routing.targets,
    config.routing.tenants,
  )
  const engineId = p.engines ? p.engineId : undefined
  const engines = p.engines
  // With engine routing, a session's files, processes, code, ports, deletion and snapshots are
  // served beside its engine; snapshots taken here record this engine, and sessions started from
  // one here are placed on it (its image and workspace copy exist only here).
  const { sessions, processes, code, snapshots, streams, gateway } = engineServices(
    {
      ...(engines ? { engines } : {}),
      directory,
      snapshotRecords: stores.snapshots,
      registry,
      config,
      ...(p.engineId ? { engineId: p.engineId } : {}),
    },
    {
      sessions: localSessions,
      processes: new PooledProcessService(directory, pool, {
        maxRunning: config.quotas.maxProcessesPerSession,
        outputBufferBytes: config.quotas.processOutputBytes,
      }),
      code: new PooledCodeService(directory, pool, (r) => registry.profile(r.profile, r.provider)),
      snapshots: new PooledSnapshotService({
        sessions: localSessions,
        directory,
        snapshots: stores.snapshots,
        pool,
        providers: registry,
        maxSnapshots: config.quotas.maxSnapshots,
        ...(engines && engineId !== undefined ? { engineId, pin: (key) => engines.pin(key, engineId) } : {}),
      }),
      ...(p.role === 'api' ? {} : { streams: new PooledSessionStreams(directory, routing.routed) }),
    },
  )
  return {
    exec: new QueueExecService(
      p.queue,
      routing.router,
      directory,
      new TenantJobLimiter(config.quotas.maxConcurrentJobs),
      routing.routed,
    ),
    sessions,
    snapshots,
    ...(streams ? { streams } : {}),
    processes,
    code,
    toolCalls: new ChainToolCallService(p.chains, routing.router, directory),
    ...(gateway ? { gateway } : {}),
  }
}

/**
 * Sweeps snapshots a crash left `creating`, and the data of snapshots deleted while their engine was
 * away (on this process's engine), every `everyMs` (0: never), until the runtime closes.
 */
export function sweepFailedSnapshots(
  snapshots: PooledSnapshotService,
  everyMs: number,
  logger: Logger,
  cleanups: Cleanups,
): void {
  if (everyMs <= 0) return
  const sweeping = setInterval(() => {
    snapshots.sweepFailed().catch((err: unknown) => logger.warn({ err }, 'sweeping failed snapshots failed'))
    snapshots
      .sweepLeftovers()
      .catch((err: unknown) => logger.warn({ err }, 'removing the data of deleted snapshots failed'))
  }, everyMs)
  sweeping.unref()
  cleanups.add(async () => clearInterval(sweeping))
}
