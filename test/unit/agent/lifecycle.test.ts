import { describe, expect, it } from 'vitest'
import { createAgent, defineTool, scriptedModel, scriptedToolCall } from '../../../src/agent/index.js'
import type { LifecycleEvent } from '../../../src/lifecycle/index.js'
import { recordingHook } from '../../support/agent-doubles.js'

const noop = defineTool({
  name: 'noop',
  description: 'd',
  parameters: { type: 'object' },
  execute: () => 'ok',
})

describe('lifecycle events of a run', () => {
  it('every stage emits its event with the step number and the session id', async () => {
    const { hook, events } = recordingHook()
    const model = scriptedModel([{ toolCalls: [scriptedToolCall('noop', {}, 'n1')] }, 'done'])
    await createAgent({ model, tools: [noop], lifecycleHooks: [hook] }).run('q', { sessionId: 'sess-9' })
    expect(events.map((e) => `${e.type}@${e.step}`)).toEqual([
      'BEFORE_TURN@1',
      'BEFORE_MODEL_REQUEST@1',
      'AFTER_MODEL_RESPONSE@1',
      'BEFORE_TOOL_CALL@1',
      'AFTER_TOOL_CALL@1',
      'AFTER_TURN@1',
      'BEFORE_TURN@2',
      'BEFORE_MODEL_REQUEST@2',
      'AFTER_MODEL_RESPONSE@2',
      'AFTER_TURN@2',
    ])
    for (const e of events) expect(e).toMatchObject({ runtime: 'agent', sessionId: 'sess-9' })
    expect(events[1]?.payload).toMatchObject({ model: 'scripted', isLastIteration: false })
    expect(events[3]).toMatchObject({ message: 'noop', attributes: { callId: 'n1', decision: 'allow' } })
    expect(events[4]?.attributes).toMatchObject({ callId: 'n1', outcome: 'ok', via: 'local' })
    expect(events[4]?.attributes).not.toHaveProperty('route')
    expect(events[9]?.payload).toMatchObject({ finished: true, finishReason: { kind: 'natural_stop' } })
  })

  it('a throwing hook is recorded as an ERROR event and the run continues', async () => {
    const { hook: recorder, events } = recordingHook()
    const broken = {
      name: 'broken',
      onEvent: (e: LifecycleEvent) => {
        if (e.type === 'BEFORE_MODEL_REQUEST') throw new Error('hook bug')
      },
    }
    const agent = createAgent({ model: scriptedModel(['fine']), lifecycleHooks: [broken, recorder] })
    const r = await agent.run('q')
    expect(r.output).toBe('fine')
    const error = events.find((e) => e.type === 'ERROR')
    expect(error?.message).toBe('lifecycle hook "broken" failed on BEFORE_MODEL_REQUEST: hook bug')
    expect(error?.attributes).toMatchObject({ source: 'lifecycle-hook', hook: 'broken' })
    expect(agent.hookFailures).toHaveLength(1)
    // The other hook still saw the event.
    expect(events.some((e) => e.type === 'BEFORE_MODEL_REQUEST')).toBe(true)
  })

  it('a failing model call ends the run with finishReason error and an ERROR event', async () => {
    const { hook, events } = recordingHook()
    const r = await createAgent({
      model: scriptedModel([new Error('503 upstream overloaded')]),
      lifecycleHooks: [hook],
    }).run('q')
    expect(r.finishReason).toEqual({
      kind: 'error',
      message: 'model call failed: 503 upstream overloaded',
      code: 'UNAVAILABLE',
    })
    const error = events.find((e) => e.type === 'ERROR')
    expect(error).toMatchObject({ step: 1, attributes: { source: 'model' } })
    expect(events.at(-1)?.type).toBe('AFTER_TURN')
  })
})
