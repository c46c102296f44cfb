import { DOCKER_PROVIDER_ID } from '../../providers/docker/index.js'
import type { DockerProvider } from '../../providers/docker/index.js'
import type { Config } from '../config/schema.js'
import { AppError } from '../errors.js'
import type { EngineSide } from '../queue/engines/engine-consumer.js'
import type { ProviderRegistry } from '../sandbox/registry.js'
import { PROVIDER_LABELS } from '../sandbox/labels.js'
import { scopeLabels } from '../sessions/keys.js'

function dockerOf(registry: ProviderRegistry): DockerProvider {
  if (!registry.providerIds().includes(DOCKER_PROVIDER_ID)) {
    throw new AppError(
      'CONFIG_INVALID',
      'queue.engineRouting needs the Docker provider on exec workers (providers.docker.enabled); ' +
        'each worker runs beside one engine',
    )
  }
  return registry.get(DOCKER_PROVIDER_ID) as DockerProvider
}

/**
 * The name of the engine this worker reaches: `providers.docker.engineId`, else the engine's own ID
 * from `docker info`. Fails at start-up when the engine does not answer.
 */
export async function engineIdOf(registry: ProviderRegistry, config: Config): Promise<string> {
  const docker = dockerOf(registry)
  const configured = config.providers.docker.engineId
  if (configured !== undefined) return configured
  try {
    const info = (await docker.docker.info()) as { ID?: string }
    if (!info.ID) throw new Error('`docker info` has no ID')
    return info.ID
  } catch (err) {
    throw new AppError(
      'UNAVAILABLE',
      `cannot read the Docker engine's ID (${(err as Error).message}); start the engine (DOCKER_HOST), ` +
        'or name it with providers.docker.engineId',
      { cause: err, retryable: true },
    )
  }
}

/**
 * The engine beside this worker, for the engine queue: its ping, its load (sandboxes of this scope
 * and their memory limits, from the containers' labels), its cap, and the memory its sandboxes may
 * reserve (`providers.docker.memoryCapacityMb`, a bound; else the engine's MemTotal, read once, a weight),
 * and the worker's gateway URL (`fleet.gateway`) when it serves one.
 */
export function engineSide(
  registry: ProviderRegistry,
  engineId: string,
  scope: string,
  config: Config,
  gatewayUrl?: string,
): EngineSide {
  const docker = dockerOf(registry)
  const cap = config.providers.docker.maxSandboxes
  const configuredMb = config.providers.docker.memoryCapacityMb
  let engineMemory: Promise<{ bytes: number; strict: boolean } | undefined> | undefined
  return {
    engineId,
    health: () => docker.health(),
    load: async () => {
      const refs = await docker.list({ labels: scopeLabels(scope) })
      let reservedBytes = 0
      for (const r of refs) reservedBytes += Number(r.labels?.[PROVIDER_LABELS.memoryBytes] ?? 0) || 0
      return { running: refs.length, reservedBytes }
    },
    memory: () => {
      if (configuredMb !== undefined)
        return Promise.resolve({ bytes: configuredMb * 1024 * 1024, strict: true })
      engineMemory ??= (docker.docker.info() as Promise<{ MemTotal?: number }>).then(
        (info) =>
          typeof info.MemTotal === 'number' && info.MemTotal > 0
            ? { bytes: info.MemTotal, strict: false }
            : undefined,
        () => ((engineMemory = undefined), undefined),
      )
      return engineMemory
    },
    ...(cap === undefined ? {} : { cap }),
    ...(gatewayUrl === undefined ? {} : { gatewayUrl }),
  }
}

/**
 * About the memory limit a new Docker sandbox of `profile` takes (bytes): its memory plus its disk and
 * /tmp, which tmpfs charges to the same limit (container-spec.ts has the exact sum). 0 when the pair
 * is not a Docker profile (a routing policy resolves later).
 */
export function sandboxMemoryEstimate(
  registry: ProviderRegistry,
  providerId: string,
  profileName: string,
): number {
  if (providerId !== DOCKER_PROVIDER_ID) return 0
  try {
    const p = registry.profile(profileName, providerId)
    return (p.memoryMb + p.diskMb + (p.tmpMb ?? 0)) * 1024 * 1024
  } catch {
    return 0
  }
}
