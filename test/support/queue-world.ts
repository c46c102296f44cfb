import { randomUUID } from 'node:crypto'
import { createDockerProvider } from '../../providers/docker/index.js'
import type { DockerProvider } from '../../providers/docker/index.js'
import { createJobQueue } from '../../src/queue/index.js'
import type { JobQueue } from '../../src/queue/index.js'
import { QueueRouteExecutor } from '../../src/routing/index.js'
import type { RouteRequest } from '../../src/routing/index.js'
import type { ProfileInput } from '../../src/sandbox/profiles.js'
import { ProviderRegistry } from '../../src/sandbox/registry.js'
import {
  createSessionPool,
  MemorySessionStore,
  POOL_LABELS,
  RedisSessionStore,
} from '../../src/sessions/index.js'
import type { SandboxSessionPool, SessionStore } from '../../src/sessions/index.js'
import { startExecWorker } from '../../src/worker/index.js'
import type { ExecWorkerHandle, ExecWorkerOptions } from '../../src/worker/index.js'
import { deleteKeys, REDIS_URL } from './redis.js'

/** Profiles of the routing tests (the worker child processes use the same ones). */
export const PROFILES: Record<string, ProfileInput> = {
  default: {
    provider: 'docker',
    defaultTimeoutMs: 20_000,
    maxTimeoutMs: 60_000,
    pool: { minIdle: 0, maxSize: 16 },
  },
  capped: { provider: 'docker', outputCapBytes: 1024, pool: { minIdle: 0, maxSize: 4 } },
  short: {
    provider: 'docker',
    defaultTimeoutMs: 1_000,
    maxTimeoutMs: 2_000,
    pool: { minIdle: 0, maxSize: 4 },
  },
}

/** Names that keep one test's Redis keys and containers apart from every other test's. */
export interface WorldNames {
  readonly scope: string
  readonly queuePrefix: string
  readonly sessionPrefix: string
}

/** Fresh names for one test. */
export function worldNames(): WorldNames {
  const id = randomUUID().slice(0, 8)
  return { scope: `rt-${id}`, queuePrefix: `sbxtest-q-${id}`, sessionPrefix: `sbxtest-s-${id}:` }
}

/** Options of {@link createWorld}. */
export interface WorldOptions {
  readonly driver: 'in-process' | 'bullmq' | 'redis'
  /** @default 'redis' for the Redis drivers, 'memory' in-process */
  readonly store?: 'redis' | 'memory'
  readonly names?: WorldNames
  /** Start an exec worker in this process. @default true */
  readonly worker?: boolean
  readonly concurrency?: number
  readonly onJob?: ExecWorkerOptions['onJob']
}

/** The whole routed path in one process: Docker provider, registry, session pool, queue, worker, router. */
export interface World {
  readonly names: WorldNames
  readonly docker: DockerProvider
  readonly registry: ProviderRegistry
  readonly pool: SandboxSessionPool
  readonly queue: JobQueue
  readonly worker?: ExecWorkerHandle
  readonly executor: QueueRouteExecutor
  /** A route with a fresh callId. */
  route(command: string, over?: Partial<RouteRequest>): RouteRequest
  /** Ids of this world's containers. */
  containers(): Promise<string[]>
  /** Closes everything, destroys the world's containers and deletes its Redis keys. */
  close(): Promise<void>
}

/** Builds a {@link World}. */
export async function createWorld(opts: WorldOptions): Promise<World> {
  const names = opts.names ?? worldNames()
  const docker = createDockerProvider({ instanceId: names.scope })
  const registry = new ProviderRegistry().register(docker).addProfiles(PROFILES)
  const storeKind = opts.store ?? (opts.driver === 'in-process' ? 'memory' : 'redis')
  const store: SessionStore =
    storeKind === 'redis'
      ? new RedisSessionStore({ redis: REDIS_URL, prefix: names.sessionPrefix })
      : new MemorySessionStore()
  const pool = createSessionPool({
    providers: registry,
    store,
    scope: names.scope,
    maintenanceIntervalMs: 0,
    reapIntervalMs: 0,
  })
  const queue = await createJobQueue(
    opts.driver === 'in-process'
      ? { driver: 'in-process' }
      : { driver: opts.driver, redisUrl: REDIS_URL, prefix: names.queuePrefix, queueName: 'exec' },
  )
  const worker =
    opts.worker === false
      ? undefined
      : await startExecWorker({
          queue,
          pool,
          concurrency: opts.concurrency ?? 16,
          workerId: `local-${names.scope}`,
          ...(opts.onJob ? { onJob: opts.onJob } : {}),
        })
  const executor = new QueueRouteExecutor({ queue, targets: registry, defaultTenant: 'acme' })
  const containers = async (): Promise<string[]> =>
    (
      await docker.docker.listContainers({
        all: true,
        filters: { label: [`${POOL_LABELS.scope}=${names.scope}`] },
      })
    ).map((c) => c.Id)
  return {
    names,
    docker,
    registry,
    pool,
    queue,
    ...(worker ? { worker } : {}),
    executor,
    route: (command, over = {}) => ({
      providerId: 'docker',
      profile: 'default',
      command,
      callId: `call-${randomUUID()}`,
      toolName: 'bash',
      ...over,
    }),
    containers,
    async close() {
      await worker?.close({ deadlineMs: 5_000 })
      await queue.close()
      await pool.shutdown({ destroyIdle: true })
      for (const id of await containers()) await docker.destroy({ providerId: 'docker', id, profile: '' })
      await docker.close()
      await store.close()
      await deleteKeys(`${names.queuePrefix}:*`)
      await deleteKeys(`${names.sessionPrefix}*`)
    },
  }
}
