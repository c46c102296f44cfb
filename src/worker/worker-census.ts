import { Queue } from 'bullmq'
import type { SandboxHealth } from '../sandbox/types.js'
import type { Redis } from 'ioredis'
import { connectRedis, createRedisClient, keyspace, QUEUE_NAMES, quitRedis } from '../redis/index.js'
import { RedisQueueKeys } from '../queue/redis/keys.js'

/** The fleet's queue of routed commands (`sbx worker`): {@link QUEUE_NAMES}.exec. */
export const EXEC_QUEUE = QUEUE_NAMES.exec
/** The fleet's queue of agent runs (`sbx worker --agent`): {@link QUEUE_NAMES}.agentRuns. */
export const AGENT_RUN_QUEUE = QUEUE_NAMES.agentRuns

/** The `workers` check of `/readyz` in fleet mode: who consumes the queues right now. */
export interface WorkersCheck extends SandboxHealth {
  /** Always true: the API serves without workers; jobs wait in the queue until one connects. */
  ok: true
  /** Exec workers connected to `sbx-exec` (`sbx worker`, `sbx serve`). */
  exec: number
  /** Agent-run workers connected to `sbx-agent-runs` (`sbx worker --agent`, `sbx serve`). */
  agent: number
  /** Set when one of the queues has no consumer: what waits, and what to start. */
  warning?: string
}

/**
 * Counts the workers connected to the fleet's queues: BullMQ `Queue.getWorkers()` (Redis CLIENT LIST)
 * under the `bullmq` driver, live heartbeats under `redis`.
 */
export interface WorkerCensus {
  /** Distinct workers connected to `queue` now (cached for `cacheMs`). */
  count(queue: typeof EXEC_QUEUE | typeof AGENT_RUN_QUEUE): Promise<number>
  /** Both counts, as the `/readyz` check shows them. */
  check(): Promise<WorkersCheck>
  close(): Promise<void>
}

/** Why nothing runs: the warning shown while a queue has no consumer. */
export function noWorkerWarning(queue: typeof EXEC_QUEUE | typeof AGENT_RUN_QUEUE): string {
  return queue === AGENT_RUN_QUEUE
    ? `no agent-run worker is connected to this fleet (queue ${AGENT_RUN_QUEUE}): queued runs wait until one starts; start one with \`sbx worker --agent\``
    : `no exec worker is connected to this fleet (queue ${EXEC_QUEUE}): routed commands wait until one starts; start one with \`sbx worker\``
}

/**
 * A census of the workers on one fleet's queues. Counts are cached for `cacheMs` (a busy API polls
 * it on every queued run view) and each lookup costs one CLIENT LIST; under the `redis` queue driver
 * (`driver`) a queue's consumers (exec lanes and agent runs alike) are those whose heartbeat is live
 * (one ZCOUNT).
 */
export function createWorkerCensus(
  redisUrl: string,
  prefix: string,
  cacheMs = 1_000,
  execLanes?: () => Promise<string[]>,
  driver: 'bullmq' | 'redis' = 'bullmq',
): WorkerCensus {
  const queues = new Map<string, Queue>()
  let heartbeats: Promise<Redis> | undefined
  const heartbeatClient = (): Promise<Redis> =>
    (heartbeats ??= (async () => {
      const client = createRedisClient(redisUrl, 'command', 'sbx-census')
      await connectRedis(client, redisUrl, 5_000)
      return client
    })().catch((err: unknown) => {
      heartbeats = undefined
      throw err
    }))
  const liveConsumers = async (name: string): Promise<number> => {
    const workers = new RedisQueueKeys(keyspace(prefix).jobs(name)).workers
    return (await heartbeatClient()).zcount(workers, `(${Date.now()}`, '+inf')
  }
  const cache = new Map<string, { at: number; count: Promise<number> }>()
  const queueOf = (name: string): Queue => {
    let q = queues.get(name)
    if (!q) {
      q = new Queue(name, { connection: { url: redisUrl, enableOfflineQueue: false }, prefix })
      // Connection trouble surfaces as a rejected count; without a listener BullMQ logs every retry.
      q.on('error', () => undefined)
      queues.set(name, q)
    }
    return q
  }
  const countOne = (name: string): Promise<number> => {
    const hit = cache.get(name)
    if (hit && Date.now() - hit.at < cacheMs) return hit.count
    const p =
      driver === 'redis'
        ? liveConsumers(name)
        : queueOf(name)
            .getWorkers()
            // BullMQ puts the queue's name in `name` and the client's own in `rawname`: a worker may hold
            // more than one connection, so count distinct client names (else addresses).
            .then((clients) => new Set(clients.map((c) => c['rawname'] || c['addr'])).size)
    // A failed lookup is not cached: the next caller asks Redis again.
    p.catch(() => cache.delete(name))
    cache.set(name, { at: Date.now(), count: p })
    return p
  }
  // With engine routing, exec workers consume one lane per engine (an adopter's second consumer of a
  // down engine's lane counts once per lane).
  const count: WorkerCensus['count'] = async (name) => {
    if (name !== EXEC_QUEUE || !execLanes) return countOne(name)
    const lanes = await execLanes()
    return (await Promise.all(lanes.map(countOne))).reduce((a, b) => a + b, 0)
  }
  return {
    count,
    async check() {
      const [exec, agent] = await Promise.all([count(EXEC_QUEUE), count(AGENT_RUN_QUEUE)])
      const warnings = [
        ...(exec === 0 ? [noWorkerWarning(EXEC_QUEUE)] : []),
        ...(agent === 0 ? [noWorkerWarning(AGENT_RUN_QUEUE)] : []),
      ]
      return { ok: true, exec, agent, ...(warnings.length ? { warning: warnings.join('; ') } : {}) }
    },
    async close() {
      await Promise.all([...queues.values()].map((q) => q.close().catch(() => undefined)))
      const client = await heartbeats?.catch(() => undefined)
      if (client) await quitRedis(client)
    },
  }
}
