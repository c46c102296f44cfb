import { describe, expect, it } from 'vitest'
import type { AgentInterceptor, AgentRunState } from '../../../src/agent/index.js'
import {
  AGENT_DEFAULTS,
  createAgent,
  defineTool,
  finishNow,
  ForcedStop,
  LoopDecision,
  scriptedModel,
  scriptedToolCall,
} from '../../../src/agent/index.js'
import { InterceptorError } from '../../../src/interceptors/index.js'

let executed = 0
const work = defineTool({
  name: 'work',
  description: 'does work',
  parameters: { type: 'object', properties: {} },
  execute: () => `worked ${++executed}`,
})
const callWork = () => ({ text: 'working', toolCalls: [scriptedToolCall('work', {})] })

function stopAt(
  name: string,
  iterationsCompleted: number,
  cause: ForcedStop,
  instruction = `stop: ${name}`,
): AgentInterceptor {
  return {
    name,
    decide: (s: AgentRunState) =>
      s.iterationsCompleted >= iterationsCompleted ? finishNow(cause, instruction) : undefined,
  }
}

describe('decide and forced finals', () => {
  it('is consulted before the first iteration: FinishNow before the first model call', async () => {
    const model = scriptedModel(['final'])
    const states: number[] = []
    const spy: AgentInterceptor = { name: 'spy', decide: (s) => void states.push(s.iterationsCompleted) }
    const r = await createAgent({
      model,
      tools: [work],
      interceptors: [spy, stopAt('halt', 0, ForcedStop.custom('not today'), 'answer now')],
    }).run('q')
    expect(states).toEqual([0])
    expect(model.calls).toBe(1)
    expect(model.requests[0]).toMatchObject({ tools: [], isLastIteration: true })
    expect(model.requests[0]?.messages.at(-1)).toEqual({ role: 'user', content: 'answer now' })
    expect(r).toMatchObject({
      output: 'final',
      finishReason: { kind: 'custom', reason: 'not today' },
      iterations: 1,
    })
  })

  it('the first FinishNow wins; later interceptors are not consulted', async () => {
    let laterAsked = 0
    const later: AgentInterceptor = {
      name: 'later',
      decide: (s) => {
        laterAsked++
        return s.iterationsCompleted >= 1
          ? finishNow(ForcedStop.budgetExceeded(), 'later instruction')
          : undefined
      },
    }
    const model = scriptedModel([callWork(), 'final'])
    const r = await createAgent({
      model,
      tools: [work],
      interceptors: [stopAt('first', 1, ForcedStop.custom('first'), 'first instruction'), later],
    }).run('q')
    expect(r.finishReason).toEqual({ kind: 'custom', reason: 'first' })
    expect(model.requests[1]?.messages.at(-1)).toEqual({ role: 'user', content: 'first instruction' })
    // `later` was asked at iteration 1 (first said continue) and not again once `first` finished the run.
    expect(laterAsked).toBe(1)
  })

  it('the forced-final iteration withholds tools, sets isLastIteration and ignores tool calls in the reply', async () => {
    executed = 0
    const model = scriptedModel([
      callWork(),
      { text: 'final anyway', toolCalls: [scriptedToolCall('work', {})] },
    ])
    const r = await createAgent({
      model,
      tools: [work],
      interceptors: [stopAt('stop', 1, ForcedStop.budgetExceeded())],
    }).run('q')
    expect(model.requests.map((q) => q.tools.length)).toEqual([1, 0])
    expect(model.requests.map((q) => q.isLastIteration)).toEqual([false, true])
    expect(executed).toBe(1)
    expect(r.toolCalls).toHaveLength(1)
    expect(r.finishReason).toEqual({ kind: 'budget_exceeded' })
    expect(r.output).toBe('final anyway')
    // The ignored calls are not left dangling in the conversation.
    expect(r.messages.at(-1)).toEqual({ role: 'assistant', content: 'final anyway' })
  })

  it('reaching maxIterations makes the last iteration a forced final with finishReason max_iterations', async () => {
    const model = scriptedModel([
      callWork(),
      callWork(),
      { text: 'summary', toolCalls: [scriptedToolCall('work', {})] },
    ])
    const r = await createAgent({ model, tools: [work], maxIterations: 3 }).run('q')
    expect(r.finishReason).toEqual({ kind: 'max_iterations' })
    expect(r.output).toBe('summary')
    expect(r.iterations).toBe(3)
    expect(model.requests.map((q) => q.tools.length)).toEqual([1, 1, 0])
    expect(model.requests.map((q) => q.isLastIteration)).toEqual([false, false, true])
    expect(model.requests[2]?.messages.at(-1)).toEqual({
      role: 'user',
      content: AGENT_DEFAULTS.maxIterationsInstruction,
    })
    expect(r.toolCalls).toHaveLength(2)
  })

  it('max_iterations wins when a FinishNow lands on the last iteration', async () => {
    const model = scriptedModel([callWork(), 'end'])
    const r = await createAgent({
      model,
      tools: [work],
      maxIterations: 2,
      interceptors: [stopAt('stop', 1, ForcedStop.custom('late'), 'custom instruction')],
    }).run('q')
    expect(r.finishReason).toEqual({ kind: 'max_iterations' })
    expect(model.requests[1]?.messages.at(-1)).toEqual({ role: 'user', content: 'custom instruction' })
  })

  it('token_limit takes priority over a forced stop', async () => {
    const model = scriptedModel([{ text: 'cut sho', finishReason: 'length' }])
    const r = await createAgent({
      model,
      interceptors: [stopAt('stop', 0, ForcedStop.budgetExceeded())],
    }).run('q')
    expect(r).toMatchObject({ output: 'cut sho', finishReason: { kind: 'token_limit' } })
  })

  it('token_limit ends the run without running the tool calls of the truncated reply', async () => {
    executed = 0
    const model = scriptedModel([
      { text: '', toolCalls: [scriptedToolCall('work', {})], finishReason: 'length' },
    ])
    const r = await createAgent({ model, tools: [work] }).run('q')
    expect(r.finishReason).toEqual({ kind: 'token_limit' })
    expect(executed).toBe(0)
  })

  it('an empty forced-final answer falls back to the last assistant text of the run', async () => {
    const model = scriptedModel([callWork(), ''])
    const r = await createAgent({ model, tools: [work], maxIterations: 2 }).run('q')
    expect(r.output).toBe('working')
  })

  it('a decide that throws fails the run naming the interceptor and the decide stage', async () => {
    const bad: AgentInterceptor = {
      name: 'bad-decider',
      decide: () => {
        throw new Error('no state')
      },
    }
    const err = await createAgent({ model: scriptedModel(['x']), interceptors: [bad] })
      .run('q')
      .catch((e: unknown) => e)
    expect(err).toBeInstanceOf(InterceptorError)
    expect(err).toMatchObject({ interceptor: 'bad-decider', stage: 'decide' })
  })

  it('a decide cannot force a loop-owned reason', async () => {
    const cheat: AgentInterceptor = {
      name: 'cheat',
      decide: () => ({
        kind: 'finish_now',
        cause: { kind: 'natural_stop' } as unknown as ForcedStop,
        instruction: 'x',
      }),
    }
    const err = await createAgent({ model: scriptedModel(['x']), interceptors: [cheat] })
      .run('q')
      .catch((e: unknown) => e)
    expect(err).toMatchObject({ interceptor: 'cheat', stage: 'decide' })
    expect((err as Error).message).toMatch(/loop-owned reasons cannot be forced/)
  })

  it('factories reject loop-owned causes and empty instructions', () => {
    expect(() => LoopDecision.finishNow({ kind: 'max_iterations' } as unknown as ForcedStop, 'x')).toThrow(
      /ForcedStop/,
    )
    expect(() => finishNow(ForcedStop.budgetExceeded(), '')).toThrow(/instruction/)
    expect(() => ForcedStop.custom('')).toThrow(/non-empty/)
    expect(LoopDecision.continue()).toEqual({ kind: 'continue' })
  })

  it('decide sees accumulated state: iterations, usage, llm calls and tool calls', async () => {
    const states: AgentRunState[] = []
    const spy: AgentInterceptor = {
      name: 'spy',
      decide: (s) => void states.push({ ...s, llmCalls: [...s.llmCalls], toolCalls: [...s.toolCalls] }),
    }
    const model = scriptedModel([{ ...callWork(), usage: { inputTokens: 10, outputTokens: 5 } }, 'done'])
    await createAgent({ model, tools: [work], interceptors: [spy], maxIterations: 5 }).run('q')
    expect(
      states.map((s) => [s.iterationsCompleted, s.usage.totalTokens, s.llmCalls.length, s.toolCalls.length]),
    ).toEqual([
      [0, 0, 0, 0],
      [1, 15, 1, 1],
    ])
    expect(states[0]?.maxIterations).toBe(5)
  })
})
