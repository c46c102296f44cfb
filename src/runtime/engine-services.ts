import { DOCKER_PROVIDER_ID } from '../../providers/docker/index.js'
import type { Config } from '../config/schema.js'
import type { EngineDirectory } from '../queue/engines/engine-directory.js'
import { sandboxMemoryEstimate } from './engine-side.js'
import type { SessionDirectory } from '../services/session-directory.js'
import type { ProviderRegistry } from '../sandbox/registry.js'
import type { CodeService, ProcessService, SessionService, SessionStreamService } from '../services/index.js'
import { EngineForwarder } from '../fleet/forwarder.js'
import type { GatewayTarget } from '../fleet/gateway.js'
import { forwardedCode, forwardedProcesses, forwardedSessions, forwardedStreams } from '../fleet/services.js'

/** A process's session services, and what its gateway serves (the local ones). */
export interface EngineServices<S, P, C> {
  readonly sessions: S
  readonly processes: P
  readonly code: C
  /** Ports and terminals; absent where neither this process nor a gateway relays them. */
  readonly streams?: SessionStreamService
  /** The local services, for this worker's gateway (`fleet.gateway`); absent without an engine. */
  readonly gateway?: GatewayTarget
}

/**
 * With `queue.engineRouting` (`engines` given): the session services whose file, process and code
 * calls go to a worker of the session's engine when this process does not reach it (see
 * {@link EngineForwarder}), and the local ones for this process's gateway. Without: `local` as is.
 */
export function engineServices<S extends SessionService, P extends ProcessService, C extends CodeService>(
  ctx: {
    engines?: EngineDirectory
    directory: SessionDirectory
    registry: ProviderRegistry
    config: Config
    engineId?: string
  },
  local: { sessions: S; processes: P; code: C; streams?: SessionStreamService },
): EngineServices<S, P, C> {
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
    streams: forwardedStreams(local.streams, fw),
    ...(engineId === undefined ? {} : { gateway: { engineId, ...local } }),
  }
}
