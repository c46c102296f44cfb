import { describe, expect, it } from 'vitest'
import type { ChatMessage, ModelRequest } from '../../../src/agent/index.js'
import {
  AgentSessionError,
  createAgent,
  defineTool,
  scriptedModel,
  scriptedToolCall,
} from '../../../src/agent/index.js'
import { recordingHook } from '../../support/agent-doubles.js'

const noop = defineTool({
  name: 'noop',
  description: 'd',
  parameters: { type: 'object' },
  execute: () => 'tool-out',
})

describe('AgentSession', () => {
  it('fires SESSION_START on open and SESSION_END once on close', async () => {
    const { hook, events } = recordingHook()
    const agent = createAgent({ model: scriptedModel(['a']), lifecycleHooks: [hook] })
    const session = await agent.openSession({ sessionId: 'S1' })
    expect(events.map((e) => e.type)).toEqual(['SESSION_START'])
    expect(events[0]).toMatchObject({ runtime: 'session', sessionId: 'S1', step: 0 })
    await session.run('hi')
    await session.close()
    await session.close()
    expect(events.filter((e) => e.type === 'SESSION_END')).toHaveLength(1)
    expect(events.at(-1)).toMatchObject({ type: 'SESSION_END', sessionId: 'S1' })
    await expect(session.run('again')).rejects.toBeInstanceOf(AgentSessionError)
    expect(session.closed).toBe(true)
  })

  it('keeps the conversation across runs and tags every run event with its session id', async () => {
    const { hook, events } = recordingHook()
    const model = scriptedModel(['first answer', 'second answer'])
    const session = await createAgent({ model, lifecycleHooks: [hook] }).openSession({ sessionId: 'S2' })
    await session.run('one')
    const r = await session.run('two')
    expect(r.sessionId).toBe('S2')
    expect(model.requests[1]?.messages).toEqual([
      { role: 'user', content: 'one' },
      { role: 'assistant', content: 'first answer' },
      { role: 'user', content: 'two' },
    ])
    expect(session.messages).toHaveLength(4)
    expect(events.filter((e) => e.runtime === 'agent').every((e) => e.sessionId === 'S2')).toBe(true)
  })

  it('rejects a second concurrent run', async () => {
    let release: () => void = () => {}
    const gate = new Promise<void>((r) => (release = r))
    const model = scriptedModel([async () => (await gate, 'slow'), 'b'])
    const session = await createAgent({ model }).openSession()
    const first = session.run('1')
    await expect(session.run('2')).rejects.toThrow(/busy with another run/)
    release()
    await expect(first).resolves.toMatchObject({ output: 'slow' })
  })

  it('compact({ keepLastMessages }) summarises older turns with the model and fires ON_COMPACT', async () => {
    const { hook, events } = recordingHook()
    let compactRequest: ModelRequest | undefined
    const model = scriptedModel([
      { toolCalls: [scriptedToolCall('noop', {}, 't1')] },
      'answer one',
      'answer two',
      (req) => {
        compactRequest = req
        return {
          text: 'User asked one and two; noop returned tool-out.',
          usage: { inputTokens: 50, outputTokens: 12 },
          model: 'sum-1',
        }
      },
    ])
    const session = await createAgent({ model, tools: [noop], lifecycleHooks: [hook] }).openSession({
      sessionId: 'S3',
    })
    await session.run('one')
    await session.run('two')
    // user, assistant(call), tool, assistant, user, assistant
    expect(session.messages).toHaveLength(6)
    const result = await session.compact({ keepLastMessages: 2 })
    expect(result).toEqual({
      sessionId: 'S3',
      compacted: true,
      summary: 'User asked one and two; noop returned tool-out.',
      removedMessages: 4,
      keptMessages: 2,
      usage: {
        inputTokens: 50,
        outputTokens: 12,
        totalTokens: 62,
        cachedInputTokens: 0,
        cacheWriteInputTokens: 0,
        reasoningTokens: 0,
      },
      model: 'sum-1',
    })
    expect(session.messages).toEqual<ChatMessage[]>([
      {
        role: 'user',
        content: 'Summary of the earlier conversation:\nUser asked one and two; noop returned tool-out.',
      },
      { role: 'user', content: 'two' },
      { role: 'assistant', content: 'answer two' },
    ])
    expect(compactRequest?.tools).toEqual([])
    expect(compactRequest?.messages).toHaveLength(1)
    expect(compactRequest?.messages[0]?.content).toContain('tool noop result: tool-out')
    expect(session.usage.totalTokens).toBe(62)
    const onCompact = events.find((e) => e.type === 'ON_COMPACT')
    expect(onCompact).toMatchObject({
      sessionId: 'S3',
      payload: result,
      attributes: { removedMessages: 4, keptMessages: 2 },
    })
  })

  it('never splits a tool result from its call when compacting', async () => {
    const model = scriptedModel([{ toolCalls: [scriptedToolCall('noop', {}, 't1')] }, 'done', 'summary'])
    const session = await createAgent({ model, tools: [noop] }).openSession()
    await session.run('go')
    // user, assistant(call t1), tool(t1), assistant: keeping 2 would start at the tool result.
    const r = await session.compact({ keepLastMessages: 2 })
    expect(r).toMatchObject({ removedMessages: 1, keptMessages: 3 })
    expect(session.messages[1]).toMatchObject({ role: 'assistant', toolCalls: [{ id: 't1' }] })
    expect(session.messages[2]).toMatchObject({ role: 'tool', toolCallId: 't1' })
  })

  it('with nothing older than keepLastMessages makes no model call and reports compacted: false', async () => {
    const { hook, events } = recordingHook()
    const model = scriptedModel(['a'])
    const session = await createAgent({ model, lifecycleHooks: [hook] }).openSession()
    await session.run('q')
    const r = await session.compact({ keepLastMessages: 10 })
    expect(r).toMatchObject({ compacted: false, removedMessages: 0, keptMessages: 2 })
    expect(model.calls).toBe(1)
    expect(events.some((e) => e.type === 'ON_COMPACT')).toBe(true)
    await expect(session.compact({ keepLastMessages: -1 })).rejects.toThrow(/non-negative integer/)
  })

  it('a failed compaction rejects and leaves the conversation unchanged', async () => {
    const model = scriptedModel(['a', new Error('overloaded')])
    const session = await createAgent({ model }).openSession({
      messages: [{ role: 'user', content: 'earlier' }],
    })
    await session.run('q')
    const before = session.messages
    await expect(session.compact({ keepLastMessages: 0 })).rejects.toThrow(
      /compaction failed: overloaded; the conversation is unchanged/,
    )
    expect(session.messages).toBe(before)
  })
})
