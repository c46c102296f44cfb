import { hostname } from 'node:os'
import { z } from 'zod'
import { createJobQueue } from '../queue/create-job-queue.js'
import { jobResultSchema } from '../queue/schemas.js'
import type { Consumer, JobKind, JobProcessor, JobQueue } from '../queue/types.js'
import { QUEUE_NAMES } from '../redis/index.js'
import { AGENT_RUN_QUEUE, noWorkerWarning } from './worker-census.js'
import type { WorkerCensus } from './worker-census.js'
import type { AgentRunDeps } from '../services/agent-runs/execute.js'
import { endSkippedRun, executeAgentRun } from '../services/agent-runs/execute.js'
import type { AgentRunDispatcher } from '../services/agent-runs/service.js'

/**
 * An agent run as a job on its queue (`sbx-agent-runs`): which run, of which tenant. The run's
 * request, state, events and output live in the run store; the job is its place in the queue, its
 * lease, its fence and its cancel.
 */
export const AgentRunJobSchema = z
  .object({
    /** The run's id (`run-<uuid>`). */
    jobId: z.string().min(1),
    tenant: z.string().min(1),
    /** Never: a redelivered run that began ends failed JOB_INTERRUPTED rather than run twice. */
    idempotent: z.literal(false),
    /** Epoch ms when the run was created. */
    submittedAt: z.number(),
  })
  .strict()

/** An agent run as a job on its queue. */
export type AgentRunJob = z.output<typeof AgentRunJobSchema>

/** What a completed agent-run job carries: the state its run ended in (its record holds the rest). */
export const AgentRunValueSchema = z.object({ state: z.enum(['completed', 'failed', 'cancelled']) })

/** What a completed agent-run job carries. */
export type AgentRunValue = z.output<typeof AgentRunValueSchema>

/** Agent runs as a {@link JobKind}: a queue of them runs on any driver, as exec jobs do. */
export const AGENT_RUN_JOBS: JobKind<AgentRunJob, AgentRunValue> = {
  name: 'agent-run',
  payload: AgentRunJobSchema,
  result: jobResultSchema(AgentRunValueSchema),
}

/** The queue of agent runs (`sbx-agent-runs`). */
export type AgentRunQueue = JobQueue<AgentRunJob, AgentRunValue>

/**
 * Opens the agent-run queue on the fleet's queue driver (`redis` or `bullmq`, queue
 * `sbx-agent-runs`), or in this process (`in-process`: embedded mode). Its Redis drivers fail fast
 * while Redis is down.
 */
export function createAgentRunQueue(
  config: { driver: 'in-process' } | { driver: 'bullmq' | 'redis'; redisUrl: string; prefix: string },
): Promise<AgentRunQueue> {
  const kind = AGENT_RUN_JOBS
  switch (config.driver) {
    case 'in-process':
      return createJobQueue({ driver: 'in-process', kind })
    case 'bullmq':
    case 'redis':
      return createJobQueue({ ...config, driver: config.driver, queueName: QUEUE_NAMES.agentRuns, kind })
  }
}

/**
 * The producer side: runs go on the agent-run queue, cancels through it. With a `census`, a queued
 * run carries a warning while no agent-run worker is connected (it would wait for one).
 */
export function agentRunDispatcher(queue: AgentRunQueue, census?: WorkerCensus): AgentRunDispatcher {
  return {
    async dispatch(run) {
      await queue.submit({ jobId: run.id, tenant: run.tenant, idempotent: false, submittedAt: run.createdAt })
    },
    async cancel(id) {
      await queue.cancel(id, 'the run was cancelled')
    },
    async queuedWarning() {
      if (!census) return undefined
      // Unknown (Redis away): no warning rather than a wrong one; the run's own lookups fail then.
      const n = await census.count(AGENT_RUN_QUEUE).catch(() => undefined)
      return n === 0 ? noWorkerWarning(AGENT_RUN_QUEUE) : undefined
    },
  }
}

/**
 * Runs one agent-run job: the run starts behind the job's fence (a redelivery of a run that began ends
 * failed JOB_INTERRUPTED), and its signal is the job's (a cancel aborts it; a shutdown past the drain
 * deadline ends it JOB_INTERRUPTED and hands the job back).
 */
export function agentRunProcessor(deps: AgentRunDeps): JobProcessor<AgentRunJob, AgentRunValue> {
  return async (job, ctx) => {
    const run = await executeAgentRun(job.jobId, deps, ctx.signal, () => ctx.fence.begin({}))
    if (!run)
      return {
        status: 'failed',
        code: 'NOT_FOUND',
        message: `agent run ${job.jobId} has no record (past its retention?)`,
        retryable: false,
      }
    if (run.state === 'cancelled') return { status: 'cancelled', reason: run.error?.message ?? 'cancelled' }
    const state = run.state === 'completed' ? 'completed' : 'failed'
    return { status: 'completed', result: { state }, attempt: ctx.attempt, workerId: ctx.workerId }
  }
}

/** This process's consumer of agent runs (`sbx worker --agent`, and `sbx serve`). */
export interface AgentRunWorkerHandle {
  /** The id it is registered under on the queue (fence records, the worker census). */
  readonly workerId: string
  /** Runs at once in this process. */
  readonly concurrency: number
  /**
   * Stops taking runs, lets running ones finish for up to `deadlineMs`, then ends the rest failed
   * JOB_INTERRUPTED and hands their jobs back.
   */
  close(opts?: { deadlineMs?: number }): Promise<void>
}

/** Options of {@link startAgentRunWorker}. */
export interface AgentRunWorkerOptions {
  /** Runs at once. @default 4 */
  concurrency?: number
  /** Errors of the queue's machinery (Redis connection trouble…). @default ignore */
  onError?: (err: unknown, context: string) => void
}

/**
 * Consumes the agent-run queue in this process with the job machinery exec jobs use: leases (or
 * BullMQ locks) kept alive while a run goes on, a dead worker's runs swept back within seconds and
 * ended by their fence, cancel over the queue's channel, hand-back on drain and Redis outages.
 */
export async function startAgentRunWorker(
  queue: AgentRunQueue,
  deps: AgentRunDeps,
  opts: AgentRunWorkerOptions = {},
): Promise<AgentRunWorkerHandle> {
  const concurrency = opts.concurrency ?? 4
  const workerId = `agent-${hostname()}-${process.pid}-${Math.random().toString(36).slice(2, 6)}`
  const consumer: Consumer = await queue.consume(agentRunProcessor(deps), {
    concurrency,
    workerId,
    ...(opts.onError ? { onError: opts.onError } : {}),
    onSkipped: (job, result) => endSkippedRun(deps.store, job.jobId, result),
  })
  return {
    workerId,
    concurrency,
    close: (o) => consumer.close(o),
  }
}
