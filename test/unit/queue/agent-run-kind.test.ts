/*
 * Agent runs as jobs of the shared queue (kind `agent-run`), on the in-process driver and without
 * Redis: the fence's verdicts end the run record the way they end exec jobs, a cancel goes through
 * the queue, and a shutdown past the drain deadline ends the run JOB_INTERRUPTED and hands it back.
 */
import { describe, expect, test } from 'vitest'
import type { ModelClient, ModelRequest } from '../../../src/agent/model-client.js'
import type { AgentRunDeps } from '../../../src/services/agent-runs/execute.js'
import { endSkippedRun, executeAgentRun } from '../../../src/services/agent-runs/execute.js'
import { MemoryAgentRunStore } from '../../../src/services/agent-runs/memory-store.js'
import type { AgentRunRecord } from '../../../src/services/agent-runs/types.js'
import {
  agentRunDispatcher,
  AGENT_RUN_JOBS,
  createAgentRunQueue,
  startAgentRunWorker,
} from '../../../src/worker/agent-run-worker.js'
import { TestRouter, execResult } from '../../support/agent-doubles.js'

/** A model whose every call waits until its signal aborts; `calls` counts them, `called` resolves on the first. */
function hangingModel(): ModelClient & { calls: number; called: Promise<void> } {
  let first!: () => void
  const called = new Promise<void>((r) => (first = r))
  const model = {
    model: 'fake',
    calls: 0,
    called,
    generate(_req: ModelRequest, signal: AbortSignal) {
      model.calls += 1
      first()
      return new Promise<never>((_resolve, reject) => {
        signal.addEventListener('abort', () => reject(signal.reason as Error), { once: true })
      })
    },
  }
  return model
}

function depsWith(store: MemoryAgentRunStore, model: ModelClient): AgentRunDeps {
  return {
    store,
    chains: { toolCall: [], prompt: [], modelRequest: [], lifecycleHooks: [] },
    router: new TestRouter(() => execResult()),
    model: () => model,
  }
}

function queuedRun(id: string): AgentRunRecord {
  return { id, tenant: 't1', state: 'queued', request: { input: 'go' }, createdAt: Date.now() }
}

/** Resolves once the run's record is final. */
async function untilFinal(store: MemoryAgentRunStore, id: string): Promise<AgentRunRecord> {
  const final = (r: AgentRunRecord | undefined): boolean =>
    r?.state === 'completed' || r?.state === 'failed' || r?.state === 'cancelled'
  return new Promise((resolve) => {
    void store.subscribe(id, () => {
      void store.get(id).then((r) => {
        if (r && final(r)) resolve(r)
      })
    })
  })
}

describe('the agent-run job kind', () => {
  test('its payload schema takes a run reference and nothing else', () => {
    const job = { jobId: 'run-1', tenant: 't1', idempotent: false, submittedAt: 1 }
    expect(AGENT_RUN_JOBS.payload.parse(job)).toEqual(job)
    expect(AGENT_RUN_JOBS.payload.safeParse({ ...job, idempotent: true }).success).toBe(false)
    expect(AGENT_RUN_JOBS.payload.safeParse({ ...job, command: 'x' }).success).toBe(false)
  })

  test('a fence that found an earlier start ends the run failed JOB_INTERRUPTED without running it', async () => {
    const store = new MemoryAgentRunStore()
    const model = hangingModel()
    await store.create(queuedRun('run-f'))
    const previous = { attempt: 1, workerId: 'w-dead', startedAt: Date.now() }
    const run = await executeAgentRun('run-f', depsWith(store, model), new AbortController().signal, () =>
      Promise.resolve({ kind: 'fenced', previous, stdout: '', stderr: '' }),
    )
    expect(run).toMatchObject({ state: 'failed', error: { code: 'JOB_INTERRUPTED' } })
    expect(model.calls).toBe(0)
  })

  test('a job ended without its processor ends the record the same way; a final record stays', async () => {
    const store = new MemoryAgentRunStore()
    await store.create(queuedRun('run-s'))
    await endSkippedRun(store, 'run-s', { status: 'interrupted', message: 'm', stdout: '', stderr: '' })
    expect(await store.get('run-s')).toMatchObject({ state: 'failed', error: { code: 'JOB_INTERRUPTED' } })
    await endSkippedRun(store, 'run-s', { status: 'cancelled', reason: 'late' })
    expect((await store.get('run-s'))?.state).toBe('failed')
  })

  test('in-process: a cancel through the queue aborts the running run; it ends cancelled', async () => {
    const store = new MemoryAgentRunStore()
    const model = hangingModel()
    const queue = await createAgentRunQueue({ driver: 'in-process' })
    const worker = await startAgentRunWorker(queue, depsWith(store, model))
    try {
      const dispatcher = agentRunDispatcher(queue)
      const record = queuedRun('run-c')
      await store.create(record)
      const ended = untilFinal(store, 'run-c')
      await dispatcher.dispatch(record)
      await model.called
      expect((await store.get('run-c'))?.state).toBe('running')
      await dispatcher.cancel('run-c')
      expect(await ended).toMatchObject({ state: 'cancelled', error: { code: 'JOB_CANCELLED' } })
      expect(await queue.wait('run-c', { timeoutMs: 5_000 })).toEqual({
        status: 'cancelled',
        reason: 'the run was cancelled',
      })
    } finally {
      await worker.close({ deadlineMs: 0 })
      await queue.close()
    }
  })

  test('in-process: a worker stopping past its drain deadline ends the run JOB_INTERRUPTED, never run again', async () => {
    const store = new MemoryAgentRunStore()
    const model = hangingModel()
    const queue = await createAgentRunQueue({ driver: 'in-process' })
    const first = await startAgentRunWorker(queue, depsWith(store, model))
    const record = queuedRun('run-d')
    await store.create(record)
    await agentRunDispatcher(queue).dispatch(record)
    await model.called
    await first.close({ deadlineMs: 0 })
    expect(await store.get('run-d')).toMatchObject({ state: 'failed', error: { code: 'JOB_INTERRUPTED' } })
    // The job was handed back: the next worker takes it, and its fence ends it without a model call.
    const second = await startAgentRunWorker(queue, depsWith(store, model))
    try {
      const result = await queue.wait('run-d', { timeoutMs: 5_000 })
      expect(result.status).toBe('interrupted')
      expect(model.calls).toBe(1)
    } finally {
      await second.close({ deadlineMs: 0 })
      await queue.close()
    }
  })
})
