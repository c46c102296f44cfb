import { randomUUID } from 'node:crypto'
import type { Redis } from 'ioredis'
import { DOCKER_PROVIDER_ID } from '../../providers/docker/index.js'
import type { Config } from '../config/index.js'
import { MemoryE2BState, RedisE2BState } from '../services/e2b/state.js'
import type { E2BState } from '../services/e2b/state.js'
import { MemoryServiceEventLog, RedisServiceEventLog } from '../lifecycle/service-events.js'
import type { ServiceEventLog } from '../lifecycle/service-events.js'
import type { Logger } from '../logger.js'
import type { ProviderRegistry } from '../sandbox/registry.js'
import { LABELS } from '../sandbox/types.js'
import { createSessionPool } from '../sessions/pool.js'
import type { SandboxSessionPool } from '../sessions/pool.js'
import { MemorySessionStore } from '../sessions/store/memory.js'
import { RedisSessionStore } from '../sessions/store/redis.js'
import type { Cleanups } from './cleanups.js'
import type { RuntimeOptions } from './create-runtime.js'
import { MemorySessionDirectory, RedisSessionDirectory } from '../services/session-directory.js'
import type { SessionDirectory } from '../services/session-directory.js'
import { MemorySnapshotDirectory, RedisSnapshotDirectory } from '../services/snapshot-directory.js'
import type { SnapshotDirectory } from '../services/snapshot-directory.js'

/** The records the services keep: in Redis for a fleet (every process sees them), else in memory. */
export interface Stores {
  readonly directory: SessionDirectory
  /** The E2B endpoint's sandbox records. */
  readonly e2bState: E2BState
  readonly snapshots: SnapshotDirectory
  /** The service's lifecycle events (circuit transitions), for `GET /v1/events`. */
  readonly serviceEvents: ServiceEventLog
}

/** The stores under `prefix` in `redis`, or in memory without one. Opens nothing. */
export function buildStores(redis: Redis | undefined, prefix: string): Stores {
  if (!redis) {
    return {
      directory: new MemorySessionDirectory(),
      e2bState: new MemoryE2BState(),
      snapshots: new MemorySnapshotDirectory(),
      serviceEvents: new MemoryServiceEventLog(),
    }
  }
  return {
    directory: new RedisSessionDirectory(redis, `${prefix}:`),
    e2bState: new RedisE2BState(redis, `${prefix}:e2b:`),
    snapshots: new RedisSnapshotDirectory(redis, `${prefix}:`),
    serviceEvents: new RedisServiceEventLog(redis, prefix),
  }
}

/** What {@link buildPool} needs. */
export interface PoolParts {
  readonly config: Config
  readonly registry: ProviderRegistry
  /** The fleet's Redis (bindings shared by every process), else bindings live in this process. */
  readonly redis: Redis | undefined
  readonly prefix: string
  /** The Docker engine this process's exec worker reaches (`queue.engineRouting`). */
  readonly engineId: string | undefined
  readonly tuning: RuntimeOptions['pool']
  readonly logger: Logger
}

/**
 * The session pool over a Redis or memory store, its quotas from the config. Its cleanup shuts it
 * down; in embedded mode it also destroys the sandboxes this process created.
 */
export function buildPool(p: PoolParts, cleanups: Cleanups): SandboxSessionPool {
  const { config, registry, redis, prefix, engineId, logger } = p
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
    ...(p.tuning ?? {}),
    onError: (err, context) => logger.warn({ err, context }, 'session pool background error'),
  })
  cleanups.add(async () => {
    await pool.shutdown({ destroyIdle: true })
    // Embedded mode keeps bindings in memory: they die with this process, so its sandboxes go too
    // (a fleet's bindings live in Redis and outlive any one process).
    if (!redis) await destroyInstanceSandboxes(registry, instanceId)
  })
  return pool
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
