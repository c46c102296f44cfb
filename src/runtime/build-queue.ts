import type { Config } from '../config/index.js'
import { createJobQueue } from '../queue/create-job-queue.js'
import { createEngineJobQueue } from '../queue/engines/engine-queue.js'
import type { EngineJobQueue } from '../queue/engines/engine-queue.js'
import type { EngineDirectory } from '../queue/engines/engine-directory.js'
import type { JobQueue } from '../queue/types.js'
import type { ProviderRegistry } from '../sandbox/registry.js'
import type { Cleanups } from './cleanups.js'
import { engineSide, sandboxMemoryEstimate } from './engine-side.js'

/** The exec job queue and, with `queue.engineRouting`, the fleet's engines it routes over. */
export interface Queue {
  readonly queue: JobQueue
  readonly engines?: EngineDirectory
}

/**
 * The exec job queue of `queue.driver`: in-process, on Redis (`bullmq` or `redis`), or (with
 * `queue.engineRouting`) one lane of that driver per Docker engine, this process consuming the lane of `engineId` when it has one (its
 * heartbeat carries `gatewayUrl`, this worker's gateway, when given).
 */
export async function buildQueue(
  config: Config,
  registry: ProviderRegistry,
  prefix: string,
  engineId: string | undefined,
  cleanups: Cleanups,
  gatewayUrl?: string,
): Promise<Queue> {
  const driver = config.queue.driver
  const queue =
    driver !== 'memory' && config.queue.engineRouting === true
      ? await createEngineJobQueue({
          driver,
          redisUrl: config.queue.redisUrl,
          prefix,
          ...(engineId === undefined
            ? {}
            : { engine: engineSide(registry, engineId, prefix, config, gatewayUrl) }),
          memoryOf: (job) => sandboxMemoryEstimate(registry, job.providerId, job.profile),
        })
      : await createJobQueue(
          driver !== 'memory'
            ? { driver, redisUrl: config.queue.redisUrl, prefix }
            : { driver: 'in-process' },
        )
  cleanups.add(() => queue.close())
  const engines = 'engines' in queue ? (queue as EngineJobQueue).engines : undefined
  return { queue, ...(engines ? { engines } : {}) }
}
