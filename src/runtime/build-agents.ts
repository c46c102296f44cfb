import type { Redis } from 'ioredis'
import type { Config } from '../config/index.js'
import type { InterceptorChains } from '../extensions/compose.js'
import type { EngineDirectory } from '../queue/engines/engine-directory.js'
import { laneName } from '../queue/engines/engine-directory.js'
import type { QueueRouteExecutor } from '../routing/queue-route-executor.js'
import type { AgentRunDeps } from '../services/agent-runs/execute.js'
import { MemoryAgentRunStore } from '../services/agent-runs/memory-store.js'
import { modelFor } from '../services/agent-runs/models.js'
import { RedisAgentRunStore } from '../services/agent-runs/redis-store.js'
import { agentRunDispatcher, createAgentRunQueue, startAgentRunWorker } from '../worker/agent-run-worker.js'
import type { AgentRunWorkerHandle } from '../worker/agent-run-worker.js'
import { AgentRunService } from '../services/agent-runs/service.js'
import type { AgentRunRecord } from '../services/agent-runs/types.js'
import type { Cleanups } from './cleanups.js'
import type { PooledCodeService } from '../services/code-service.js'
import type { PooledProcessService } from '../services/process-service.js'
import { ensureSessionRecord } from '../services/session-directory.js'
import type { SessionDirectory } from '../services/session-directory.js'
import { createWorkerCensus, EXEC_QUEUE } from '../worker/worker-census.js'
import type { WorkerCensus } from '../worker/worker-census.js'

/** Agent runs: the service, this process's consumer of them, and the fleet's worker census. */
export interface Agents {
  readonly agentRuns: AgentRunService
  /** The agent-run consumer of this process (fleet mode with `agentWorker`). */
  readonly agentWorker?: AgentRunWorkerHandle
  /** Who consumes the fleet's queues (fleet mode only). */
  readonly census?: WorkerCensus
}

/** What {@link buildAgents} needs. */
export interface AgentParts {
  readonly config: Config
  /** The fleet's Redis (runs shared by every process), else runs live in this process. */
  readonly redis: Redis | undefined
  readonly prefix: string
  /** Consume the fleet's agent runs in this process (ignored in embedded mode, which runs them). */
  readonly consume: boolean
  /** Agent runs at once in this process's consumer. */
  readonly concurrency: number | undefined
  /** Environment for model API keys. */
  readonly env: Readonly<Record<string, string | undefined>>
  readonly chains: InterceptorChains
  readonly router: QueueRouteExecutor
  readonly processes: PooledProcessService
  readonly code: PooledCodeService
  readonly directory: SessionDirectory
  readonly engines: EngineDirectory | undefined
  /** Observes finished runs (metrics). */
  readonly onFinished: (record: AgentRunRecord) => void
  /** Errors of the agent-run queue's machinery. @default ignore */
  readonly onError?: (err: unknown, context: string) => void
}

/**
 * The agent-run store, the agent-run job queue (`sbx-agent-runs` on the fleet's queue driver, or in
 * this process when embedded), this process's consumer of it and the service the API calls. A run's
 * session is recorded on the shell route's target.
 */
export async function buildAgents(p: AgentParts, cleanups: Cleanups): Promise<Agents> {
  const { config, redis, prefix, env } = p
  const store = redis ? new RedisAgentRunStore(redis, `${prefix}:`) : new MemoryAgentRunStore()
  cleanups.add(() => store.close())
  const deps: AgentRunDeps = {
    store,
    chains: p.chains,
    router: p.router,
    processes: p.processes,
    code: p.code,
    model: (name) => modelFor(config, name, env),
    onFinished: p.onFinished,
  }
  const census = redis ? censusOf(config, prefix, p.engines) : undefined
  if (census) cleanups.add(() => census.close())
  // Embedded: the queue lives in this process, which always consumes it.
  const driver = redis ? config.queue.driver : 'in-process'
  const queue = await createAgentRunQueue(
    driver === 'bullmq' || driver === 'redis'
      ? { driver, redisUrl: config.queue.redisUrl, prefix }
      : { driver: 'in-process' },
  )
  cleanups.add(() => queue.close())
  const dispatcher = agentRunDispatcher(queue, census)
  let agentWorker: AgentRunWorkerHandle | undefined
  if (!redis || p.consume) {
    const consumer = await startAgentRunWorker(queue, deps, {
      ...(p.concurrency === undefined ? {} : { concurrency: p.concurrency }),
      ...(p.onError ? { onError: p.onError } : {}),
    })
    // The fleet's consumer is shown (`sbx worker --agent` prints it); an embedded one is not.
    if (redis) agentWorker = consumer
    cleanups.add(() => consumer.close())
  }
  const { providerId: provider, profile } = config.routing.shell
  const agentRuns = new AgentRunService(
    store,
    dispatcher,
    (input) => void deps.model(input.model),
    (tenant, input) => ensureSessionRecord(p.directory, tenant, input.sessionId, { provider, profile }),
  )
  return { agentRuns, ...(agentWorker ? { agentWorker } : {}), ...(census ? { census } : {}) }
}

/** The census of the fleet's workers; with engines, of the exec lanes of the live ones. */
function censusOf(config: Config, prefix: string, engines: EngineDirectory | undefined): WorkerCensus {
  const lanes = engines
    ? async () =>
        (await engines.list()).filter((e) => e.state === 'live').map((e) => laneName(EXEC_QUEUE, e.id))
    : undefined
  const driver = config.queue.driver === 'redis' ? 'redis' : 'bullmq'
  return createWorkerCensus(config.queue.redisUrl, prefix, 1_000, lanes, driver)
}
