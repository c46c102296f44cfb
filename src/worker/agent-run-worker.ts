import { hostname } from 'node:os'
import { Queue, Worker } from 'bullmq'
import { STALL_DETECTION } from '../queue/redis-common/stall-detection.js'
import { reconnectDelayMs } from '../redis/index.js'
import { AGENT_RUN_QUEUE, noWorkerWarning } from './worker-census.js'
import type { WorkerCensus } from './worker-census.js'
import type { AgentRunDeps } from '../services/agent-runs/execute.js'
import { executeAgentRun } from '../services/agent-runs/execute.js'
import type { AgentRunDispatcher } from '../services/agent-runs/service.js'

/** A process that executes agent runs. */
export interface AgentRunRunner {
  close(opts?: { deadlineMs?: number }): Promise<void>
}

/** The fleet's agent-run consumer of this process (`sbx worker --agent`). */
export interface AgentRunWorkerHandle extends AgentRunRunner {
  /** The name it is registered under on the queue (BullMQ worker name). */
  readonly workerId: string
  /** Runs at once in this process. */
  readonly concurrency: number
}

/** Aborts the runs this process holds when a cancel for them is requested (from any process). */
async function cancellable(deps: AgentRunDeps) {
  const running = new Map<string, AbortController>()
  const off = await deps.store.onCancel((id) => running.get(id)?.abort(new Error('cancelled')))
  return {
    running,
    async run(id: string): Promise<void> {
      const ac = new AbortController()
      running.set(id, ac)
      try {
        await executeAgentRun(id, deps, ac.signal)
      } finally {
        running.delete(id)
      }
    },
    off,
  }
}

/** Embedded mode: runs execute as in-process tasks, at most `concurrency` at once. */
export async function createInProcessAgentRunner(
  deps: AgentRunDeps,
  concurrency = 4,
): Promise<AgentRunDispatcher & AgentRunRunner> {
  const c = await cancellable(deps)
  const waiting: string[] = []
  const active = new Set<Promise<void>>()
  const pump = (): void => {
    while (active.size < concurrency && waiting.length > 0) {
      const id = waiting.shift() as string
      const p: Promise<void> = c.run(id).finally(() => {
        active.delete(p)
        pump()
      })
      active.add(p)
    }
  }
  return {
    async dispatch(id) {
      waiting.push(id)
      pump()
    },
    async close({ deadlineMs = 30_000 } = {}) {
      waiting.length = 0
      const timer = setTimeout(() => c.running.forEach((ac) => ac.abort(new Error('shutdown'))), deadlineMs)
      await Promise.allSettled([...active])
      clearTimeout(timer)
      await c.off()
    },
  }
}

/**
 * Fleet mode, producer side: runs go on the BullMQ queue `sbx-agent-runs`. With a `census`, a queued
 * run carries a warning while no agent-run worker is connected (it would wait for one).
 */
export function createBullmqAgentDispatcher(
  redisUrl: string,
  prefix: string,
  census?: WorkerCensus,
): AgentRunDispatcher & AgentRunRunner {
  const queue = new Queue(AGENT_RUN_QUEUE, {
    // Reconnects back off to 1 s like the exec queue's (ioredis' default waits up to 2 s, and BullMQ's
    // own recovery longer): runs are accepted again as soon as Redis is back.
    connection: { url: redisUrl, enableOfflineQueue: false, retryStrategy: reconnectDelayMs },
    prefix,
  })
  // Connection trouble surfaces as a rejected dispatch (503 at the API); without a listener BullMQ
  // prints every reconnect failure while Redis is away.
  queue.on('error', () => undefined)
  return {
    async dispatch(id) {
      await queue.add(
        'run',
        { id },
        { jobId: id, removeOnComplete: { age: 3600 }, removeOnFail: { age: 86_400 } },
      )
    },
    async queuedWarning() {
      if (!census) return undefined
      // Unknown (Redis away): no warning rather than a wrong one; the run's own lookups fail then.
      const n = await census.count(AGENT_RUN_QUEUE).catch(() => undefined)
      return n === 0 ? noWorkerWarning(AGENT_RUN_QUEUE) : undefined
    },
    async close() {
      await queue.close()
    },
  }
}

/** Fleet mode, worker side (`sbx worker --agent`): consumes `sbx-agent-runs`. */
export async function startBullmqAgentWorker(
  deps: AgentRunDeps,
  redisUrl: string,
  prefix: string,
  concurrency = 4,
): Promise<AgentRunWorkerHandle> {
  const c = await cancellable(deps)
  const active = new Set<Promise<unknown>>()
  const workerId = `agent-${hostname()}-${process.pid}-${Math.random().toString(36).slice(2, 6)}`
  const worker = new Worker<{ id: string }>(
    AGENT_RUN_QUEUE,
    async (job) => {
      const run = c.run(job.data.id)
      active.add(run)
      try {
        return await run
      } finally {
        active.delete(run)
      }
    },
    {
      connection: { url: redisUrl, maxRetriesPerRequest: null, retryStrategy: reconnectDelayMs },
      prefix,
      concurrency,
      name: workerId,
      // A dead agent worker's run is found within seconds, as exec jobs are (not after BullMQ's 30 s).
      lockDuration: STALL_DETECTION.lockDurationMs,
      stalledInterval: STALL_DETECTION.stalledIntervalMs,
    },
  )
  worker.on('error', () => undefined)
  await worker.waitUntilReady()
  return {
    workerId,
    concurrency,
    async close({ deadlineMs = 30_000 } = {}) {
      // Our own drain, then a forced close: BullMQ's graceful close can wait forever for a
      // connection that is not coming back (Redis away at shutdown).
      const timer = setTimeout(() => c.running.forEach((ac) => ac.abort(new Error('shutdown'))), deadlineMs)
      const stopping = worker.pause(true).catch(() => undefined)
      await Promise.allSettled([...active])
      clearTimeout(timer)
      await Promise.race([
        Promise.all([stopping, worker.close(true)]).catch(() => undefined),
        new Promise((resolve) => setTimeout(resolve, 5_000).unref()),
      ])
      await c.off()
    },
  }
}
