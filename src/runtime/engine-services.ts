import { DOCKER_PROVIDER_ID } from '../../providers/docker/index.js'
import type { Config } from '../config/schema.js'
import type { EngineDirectory } from '../queue/engines/engine-directory.js'
import { sandboxMemoryEstimate } from './engine-side.js'
import type { SessionDirectory } from '../services/session-directory.js'
import type { ProviderRegistry } from '../sandbox/registry.js'
import type {
  CodeService,
  ProcessService,
  SessionService,
  SessionStreamService,
  SnapshotService,
} from '../services/index.js'
import type { SnapshotDirectory } from '../services/snapshot-directory.js'
import { EngineForwarder } from '../fleet/forwarder.js'
import type { GatewayTarget } from '../fleet/gateway.js'
import {
  forwardedCode,
  forwardedProcesses,
  forwardedSessions,
  forwardedSnapshots,
  forwardedStreams,
} from '../fleet/services.js'

/** A process's session services, and what its gateway serves (the local ones). */
export interface EngineServices<S, P, C, N> {
  readonly sessions: S
  readonly processes: P
  readonly code: C
  readonly snapshots: N
  /** Ports and terminals; absent where neither this process nor a gateway relays them. */
  readonly streams?: SessionStreamService
  /** The local services, for this worker's gateway (`fleet.gateway`); absent without an engine. */
  readonly gateway?: GatewayTarget
}

/**
 * With `queue.engineRouting` (`engines` given): the session services whose file, process, code,
 * delete and snapshot calls go to a worker of the session's engine (a snapshot's calls to the engine
 * holding it) when this process does not reach it (see {@link EngineForwarder}), and the local ones
 * for this process's gateway. Without: `local` as is.
 */
export function engineServices<
  S extends SessionService,
  P extends ProcessService,
  C extends CodeService,
  N extends SnapshotService,
>(
  ctx: {
    engines?: EngineDirectory
    directory: SessionDirectory
    /** The snapshot records (shared): where each snapshot lives. */
    snapshotRecords: Pick<SnapshotDirectory, 'get'>
    registry: ProviderRegistry
    config: Config
    engineId?: string
  },
  local: { sessions: S; processes: P; code: C; snapshots: N; streams?: SessionStreamService },
): EngineServices<S, P, C, N> {
  const { engines, registry, config, engineId } = ctx
  if (!engines) return local
  const fw = new EngineForwarder({
    engines,
    directory: ctx.directory,
    ...(engineId === undefined ? {} : { localEngineId: engineId }),
    ...(config.fleet.secret === undefined ? {} : { secret: config.fleet.secret }),
    // Docker and the routing policies are placed on engines; other providers are reached from anywhere.
    engineBound: (provider) => provider === DOCKER_PROVIDER_ID || !registry.providerIds().includes(provider),
    memoryOf: (provider, profile) => sandboxMemoryEstimate(registry, provider, profile),
  })
  return {
    sessions: forwardedSessions(local.sessions, fw),
    processes: forwardedProcesses(local.processes, fw),
    code: forwardedCode(local.code, fw),
    snapshots: forwardedSnapshots(local.snapshots, fw, ctx.snapshotRecords),
    streams: forwardedStreams(local.streams, fw),
    ...(engineId === undefined ? {} : { gateway: { engineId, ...local } }),
  }
}
