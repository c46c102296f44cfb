/**
 * One routed path for the benchmarks: a queue driver + session store + exec worker + router over the
 * given providers, on its own scope and key prefix, with a `run(sessionId)` that routes `echo hi`.
 */
import { randomUUID } from 'node:crypto'
import { Redis } from 'ioredis'
import { createJobQueue } from '../../src/queue/index.js'
import type { JobQueueConfig } from '../../src/queue/index.js'
import { QueueRouteExecutor } from '../../src/routing/index.js'
import type { RouteContext } from '../../src/routing/index.js'
import type { ProfileInput } from '../../src/sandbox/profiles.js'
import { ProviderRegistry } from '../../src/sandbox/registry.js'
import type { SandboxProvider } from '../../src/sandbox/types.js'
import {
  createSessionPool,
  MemorySessionStore,
  POOL_LABELS,
  RedisSessionStore,
} from '../../src/sessions/index.js'
import type { SandboxSessionPool, SessionStore } from '../../src/sessions/index.js'
import { startExecWorker } from '../../src/worker/index.js'

export const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379'

/** Options of {@link createRoutedPath}. */
export interface RoutedPathOptions {
  /** Providers to register (shared between paths; not closed by the path). */
  providers: SandboxProvider[]
  /** The profile `run` routes to (name `bench`). */
  profile: ProfileInput
  queue: 'in-process' | 'bullmq'
  store: 'memory' | 'redis'
}

/** A routed path: `run` routes `echo hi` into a session; `close` removes its sandboxes and keys. */
export interface RoutedPath {
  pool: SandboxSessionPool
  run(sessionId: string, ctx?: RouteContext): Promise<void>
  close(): Promise<void>
}

/** Builds one routed path (see the module comment). */
export async function createRoutedPath(opts: RoutedPathOptions): Promise<RoutedPath> {
  const id = randomUUID().slice(0, 8)
  const scope = `bench-${id}`
  const prefix = `sbxbench-${id}`
  const registry = new ProviderRegistry()
  for (const p of opts.providers) registry.register(p)
  registry.addProfiles({ bench: opts.profile })
  const providerId = opts.profile.provider
  const sessionStore: SessionStore =
    opts.store === 'redis'
      ? new RedisSessionStore({ redis: REDIS_URL, prefix: `${prefix}:s:` })
      : new MemorySessionStore()
  const pool = createSessionPool({
    providers: registry,
    store: sessionStore,
    scope,
    maxSandboxesPerTenant: 128,
    maintenanceIntervalMs: 0,
    reapIntervalMs: 0,
  })
  const config: JobQueueConfig =
    opts.queue === 'bullmq'
      ? { driver: 'bullmq', redisUrl: REDIS_URL, prefix, queueName: 'exec' }
      : { driver: 'in-process' }
  const q = await createJobQueue(config)
  const worker = await startExecWorker({ queue: q, pool, concurrency: 64 })
  const executor = new QueueRouteExecutor({ queue: q, targets: registry, defaultTenant: 'bench' })
  return {
    pool,
    async run(sessionId, ctx) {
      const r = await executor.execute(
        {
          providerId,
          profile: 'bench',
          command: 'echo hi',
          callId: randomUUID(),
          toolName: 'bash',
          sessionId,
        },
        ctx,
      )
      if (r.stdout !== 'hi\n') throw new Error(`unexpected output ${JSON.stringify(r.stdout)}`)
    },
    async close() {
      await worker.close({ deadlineMs: 5_000 })
      await q.close()
      await pool.shutdown({ destroyIdle: true })
      const provider = registry.get(providerId)
      for (const ref of await provider.list({ labels: { [POOL_LABELS.scope]: scope } }))
        await provider.destroy(ref)
      await sessionStore.close()
      const redis = new Redis(REDIS_URL)
      let cursor = '0'
      do {
        const [next, keys] = await redis.scan(cursor, 'MATCH', `${prefix}:*`, 'COUNT', 500)
        cursor = next
        if (keys.length > 0) await redis.del(...keys)
      } while (cursor !== '0')
      redis.disconnect()
    },
  }
}
