import type { Redis } from 'ioredis'
import type { JobQueue } from '../queue/types.js'
import type { ProviderRegistry } from '../sandbox/registry.js'
import type { SandboxHealth } from '../sandbox/types.js'
import { redisHealth } from './store-redis.js'
import type { WorkerCensus, WorkersCheck } from '../worker/worker-census.js'

/** What {@link readinessOf} checks. */
export interface ReadinessParts {
  /** The fleet's Redis and its URL (for the message), absent in embedded mode. */
  readonly redis: { client: Redis; url: string } | undefined
  readonly queue: JobQueue
  readonly registry: ProviderRegistry
  /** Who consumes the fleet's queues (fleet mode only). */
  readonly census: WorkerCensus | undefined
}

/**
 * The runtime's named readiness checks: `redis` (fleet), `queue`, each provider's health, and
 * (fleet, while Redis answers) the connected `workers`, which are informational: the API is ready
 * without workers, jobs wait.
 */
export function readinessOf(p: ReadinessParts): () => Promise<Record<string, SandboxHealth | WorkersCheck>> {
  const failed = (err: unknown): SandboxHealth => ({ ok: false, reason: (err as Error).message })
  return async () => {
    const checks: Record<string, SandboxHealth | WorkersCheck> = {}
    if (p.redis) checks['redis'] = await redisHealth(p.redis.client, p.redis.url)
    checks['queue'] = await p.queue
      .counts()
      .then(() => ({ ok: true }))
      .catch(failed)
    for (const id of p.registry.providerIds()) {
      const provider = p.registry.get(id)
      checks[id] = provider.health ? await provider.health().catch(failed) : { ok: true }
    }
    if (p.census && checks['redis']?.ok) {
      const workers = await p.census.check().catch(() => undefined)
      if (workers) checks['workers'] = workers
    }
    return checks
  }
}
