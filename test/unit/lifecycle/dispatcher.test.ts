import { describe, expect, test } from 'vitest'
import { LifecycleDispatcher } from '../../../src/lifecycle/index.js'
import type { LifecycleEvent } from '../../../src/lifecycle/index.js'

describe('lifecycle dispatcher', () => {
  test('calls hooks in registration order with the full payload', async () => {
    const seen: string[] = []
    const events: LifecycleEvent[] = []
    const d = new LifecycleDispatcher([
      { name: 'a', onEvent: (e) => (seen.push('a'), events.push(e), undefined) },
    ])
    d.register({ name: 'b', onEvent: () => void seen.push('b') })
    await d.emit({
      type: 'BEFORE_TOOL_CALL',
      runtime: 'agent',
      sessionId: 's1',
      step: 2,
      message: 'bash',
      payload: { x: 1 },
    })
    expect(seen).toEqual(['a', 'b'])
    expect(events[0]).toMatchObject({
      type: 'BEFORE_TOOL_CALL',
      runtime: 'agent',
      sessionId: 's1',
      step: 2,
      message: 'bash',
      payload: { x: 1 },
      attributes: {},
    })
    expect(typeof events[0]?.timestamp).toBe('number')
  })

  test('a throwing hook is recorded, an ERROR event is published, later hooks still run', async () => {
    const types: string[] = []
    const d = new LifecycleDispatcher([
      {
        name: 'bad',
        onEvent: (e) => {
          if (e.type !== 'ERROR') throw new Error('hook bug')
        },
      },
      { name: 'rec', onEvent: (e) => void types.push(`${e.type}:${e.message ?? ''}`) },
    ])
    await expect(d.emit({ type: 'AFTER_TURN', runtime: 'agent', step: 1 })).resolves.toBeUndefined()
    expect(types).toEqual(['ERROR:lifecycle hook "bad" failed on AFTER_TURN: hook bug', 'AFTER_TURN:'])
    expect(d.failures).toHaveLength(1)
  })

  test('a hook failing on the ERROR event is not re-published (no recursion)', async () => {
    let calls = 0
    const d = new LifecycleDispatcher([
      {
        name: 'always-bad',
        onEvent: () => {
          calls++
          throw new Error('x')
        },
      },
    ])
    await d.emit({ type: 'BEFORE_TURN', runtime: 'agent', step: 0 })
    expect(calls).toBe(2) // the event itself, then the ERROR once
    expect(d.failures.map((f) => f.type)).toEqual(['BEFORE_TURN', 'ERROR'])
  })

  test('async rejections are caught too', async () => {
    const d = new LifecycleDispatcher([
      { name: 'rej', onEvent: async () => Promise.reject(new Error('late')) },
    ])
    await expect(d.emit({ type: 'SESSION_START', runtime: 'session', step: 0 })).resolves.toBeUndefined()
    expect(d.failures[0]?.hook).toBe('rej')
  })
})
