import { DOCKER_PROVIDER_ID } from '../../providers/docker/index.js'
import type { DockerProvider } from '../../providers/docker/index.js'
import type { Config } from '../config/schema.js'
import { AppError } from '../errors.js'
import type { EngineSide } from '../queue/engines/engine-consumer.js'
import type { ProviderRegistry } from '../sandbox/registry.js'
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

/** The engine beside this worker, for the engine queue: its ping, its load and its cap. */
export function engineSide(
  registry: ProviderRegistry,
  engineId: string,
  scope: string,
  config: Config,
): EngineSide {
  const docker = dockerOf(registry)
  const cap = config.providers.docker.maxSandboxes
  return {
    engineId,
    health: () => docker.health(),
    running: async () => (await docker.list({ labels: scopeLabels(scope) })).length,
    ...(cap === undefined ? {} : { cap }),
  }
}
