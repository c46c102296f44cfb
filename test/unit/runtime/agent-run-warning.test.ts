import { describe, expect, test } from 'vitest'
import { MemoryAgentRunStore } from '../../../src/services/agent-runs/memory-store.js'
import { AgentRunService } from '../../../src/services/agent-runs/service.js'
import type { AgentRunDispatcher } from '../../../src/services/agent-runs/service.js'

/** A dispatcher that queues nothing and reports the warning it is given. */
function dispatcher(warning: { now?: string }): AgentRunDispatcher {
  return {
    dispatch: async () => undefined,
    cancel: async () => undefined,
    queuedWarning: async () => warning.now,
  }
}

describe('AgentRunService: the warning of a queued run nobody will pick up', () => {
  test('shown on submit and get while it holds, gone once a worker is connected, never stored', async () => {
    const store = new MemoryAgentRunStore()
    const state: { now?: string } = { now: 'no agent-run worker is connected' }
    const service = new AgentRunService(store, dispatcher(state), () => undefined)
    const run = await service.submit('t1', { input: 'hi' })
    expect(run.warning).toBe('no agent-run worker is connected')
    expect((await service.get('t1', run.id))?.warning).toBe('no agent-run worker is connected')
    expect((await store.get(run.id))?.warning).toBeUndefined()
    delete state.now
    expect((await service.get('t1', run.id))?.warning).toBeUndefined()
    // Another tenant still sees nothing.
    expect(await service.get('t2', run.id)).toBeUndefined()
    await store.close()
  })

  test('only queued runs carry it', async () => {
    const store = new MemoryAgentRunStore()
    const service = new AgentRunService(store, dispatcher({ now: 'nobody' }), () => undefined)
    const run = await service.submit('t1', { input: 'hi' })
    await store.update(run.id, { state: 'running' })
    expect((await service.get('t1', run.id))?.warning).toBeUndefined()
    await store.close()
  })
})
