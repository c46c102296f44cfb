import { isFleet } from '../config/schema.js'
import type { Config } from '../config/schema.js'
import type { Logger } from '../logger.js'
import { listenGateway } from './gateway.js'
import type { Gateway } from './gateway.js'

/** Room for a call's arguments beside the largest file it may carry (bytes). */
const CALL_OVERHEAD_BYTES = 2 * 1024 * 1024

/**
 * The gateway of an exec worker (`sbx worker`) in a fleet over many engines: listening when
 * `queue.engineRouting` and `fleet.secret` are set, else undefined. It answers 503 until the worker's
 * services are given to it ({@link Gateway.serve}).
 */
export async function openWorkerGateway(config: Config, logger: Logger): Promise<Gateway | undefined> {
  if (!isFleet(config) || config.queue.engineRouting !== true) return undefined
  const secret = config.fleet.secret
  if (secret === undefined) return undefined
  const { host, port, advertiseUrl } = config.fleet.gateway
  return listenGateway({
    secret,
    host,
    port,
    ...(advertiseUrl === undefined ? {} : { advertiseUrl }),
    maxBodyBytes: config.server.fileLimitBytes + CALL_OVERHEAD_BYTES,
    logger,
  })
}
