import { describe, expect, it } from 'vitest'
import { z } from 'zod'
import type { AgentInterceptor, ModelResponse, ToolCallRecord } from '../../../src/agent/index.js'
import {
  createAgent,
  defineTool,
  ForcedStop,
  scriptedModel,
  scriptedToolCall,
} from '../../../src/agent/index.js'
import { InterceptorError } from '../../../src/interceptors/index.js'
import { recordingHook, tracer } from '../../support/agent-doubles.js'

const echo = defineTool({
  name: 'echo',
  description: 'echoes its text',
  parameters: z.object({ text: z.string() }),
  execute: ({ text }) => `echo:${text}`,
})

function twoStepModel() {
  return scriptedModel([{ toolCalls: [scriptedToolCall('echo', { text: 'hi' }, 'c1')] }, 'done'])
}

describe('AgentInterceptor onion', () => {
  it('runs around-stages with the first added outermost', async () => {
    const log: string[] = []
    const agent = createAgent({
      model: twoStepModel(),
      tools: [echo],
      interceptors: [tracer('A', log), tracer('B', log)],
    })
    const r = await agent.run('go')
    expect(r.output).toBe('done')
    expect(log).toEqual([
      'A:iteration:in',
      'B:iteration:in',
      'A:llm:in',
      'B:llm:in',
      'B:llm:out',
      'A:llm:out',
      'A:tool:in',
      'B:tool:in',
      'B:tool:out',
      'A:tool:out',
      'B:iteration:out',
      'A:iteration:out',
      'A:iteration:in',
      'B:iteration:in',
      'A:llm:in',
      'B:llm:in',
      'B:llm:out',
      'A:llm:out',
      'B:iteration:out',
      'A:iteration:out',
    ])
  })

  it('next(modifiedRequest) changes what inner layers and the model receive', async () => {
    const model = scriptedModel(['ok'])
    const seen: (number | undefined)[] = []
    const outer: AgentInterceptor = {
      name: 'outer',
      aroundLlmCall: (ctx, next) => next({ ...ctx.request, temperature: 0.1 }),
    }
    const inner: AgentInterceptor = {
      name: 'inner',
      aroundLlmCall: (ctx, next) => {
        seen.push(ctx.request.temperature)
        return next()
      },
    }
    await createAgent({ model, temperature: 0.9, interceptors: [outer, inner] }).run('x')
    expect(seen).toEqual([0.1])
    expect(model.requests[0]?.temperature).toBe(0.1)
  })

  it('next(modifiedCall) changes the tool call that is executed', async () => {
    const rewrite: AgentInterceptor = {
      name: 'rewrite',
      aroundToolCall: (ctx, next) => next({ ...ctx.call, arguments: JSON.stringify({ text: 'rewritten' }) }),
    }
    const r = await createAgent({ model: twoStepModel(), tools: [echo], interceptors: [rewrite] }).run('x')
    expect(r.toolCalls[0]?.output).toBe('echo:rewritten')
    expect(r.toolCalls[0]?.callId).toBe('c1')
  })

  it('an aroundIteration next(ctx) may add an instruction for that iteration only', async () => {
    const model = scriptedModel(['ok'])
    const steer: AgentInterceptor = {
      name: 'steer',
      aroundIteration: (ctx, next) => next({ ...ctx, instruction: 'be brief' }),
    }
    const r = await createAgent({ model, interceptors: [steer] }).run('question')
    expect(model.requests[0]?.messages.at(-1)).toEqual({ role: 'user', content: 'be brief' })
    expect(r.messages).toEqual([
      { role: 'user', content: 'question' },
      { role: 'assistant', content: 'ok' },
    ])
  })

  it('not calling next short-circuits the model call', async () => {
    const model = scriptedModel([])
    const cached: AgentInterceptor = {
      name: 'cache',
      aroundLlmCall: (): ModelResponse => ({
        text: 'from cache',
        usage: { inputTokens: 1, outputTokens: 1 },
      }),
    }
    const r = await createAgent({ model, interceptors: [cached] }).run('x')
    expect(model.calls).toBe(0)
    expect(r.output).toBe('from cache')
    expect(r.finishReason).toEqual({ kind: 'natural_stop' })
    expect(r.usage.totalTokens).toBe(2)
  })

  it('not calling next short-circuits the tool call', async () => {
    let executed = 0
    const tool = defineTool({
      name: 'echo',
      description: 'd',
      parameters: { type: 'object' },
      execute: () => ++executed,
    })
    const deny: AgentInterceptor = {
      name: 'deny',
      aroundToolCall: (ctx): ToolCallRecord => ({
        callId: ctx.call.callId,
        requestedName: ctx.call.name,
        name: ctx.call.name,
        arguments: ctx.call.arguments,
        output: 'skipped by policy',
        outcome: 'blocked',
        via: 'none',
        modifiedBy: [],
        iteration: ctx.iteration,
        durationMs: 0,
      }),
    }
    const r = await createAgent({ model: twoStepModel(), tools: [tool], interceptors: [deny] }).run('x')
    expect(executed).toBe(0)
    expect(r.messages[2]).toEqual({
      role: 'tool',
      toolCallId: 'c1',
      name: 'echo',
      content: 'skipped by policy',
    })
  })

  it('calling next a second time throws, failing the run with the interceptor and stage named', async () => {
    const twice: AgentInterceptor = {
      name: 'twice',
      async aroundLlmCall(_ctx, next) {
        await next()
        return next()
      },
    }
    const model = scriptedModel(['a', 'b'])
    const err = await createAgent({ model, interceptors: [twice] })
      .run('x')
      .catch((e: unknown) => e)
    expect(err).toBeInstanceOf(InterceptorError)
    expect((err as InterceptorError).interceptor).toBe('twice')
    expect((err as InterceptorError).stage).toBe('aroundLlmCall')
    expect(((err as InterceptorError).cause as Error).message).toMatch(/next\(\) was called a second time/)
    expect(model.calls).toBe(1)
  })

  it.each(['aroundIteration', 'aroundLlmCall', 'aroundToolCall'] as const)(
    'an exception in %s fails the run (never swallowed) and publishes an ERROR event',
    async (stage) => {
      const boom: AgentInterceptor = {
        name: 'boom',
        [stage]: () => {
          throw new Error('kaput')
        },
      }
      const { hook, events } = recordingHook()
      const agent = createAgent({
        model: twoStepModel(),
        tools: [echo],
        interceptors: [boom],
        lifecycleHooks: [hook],
      })
      const err = await agent.run('x').catch((e: unknown) => e)
      expect(err).toBeInstanceOf(InterceptorError)
      expect(err).toMatchObject({ interceptor: 'boom', stage, code: 'INTERCEPTOR_FAILED' })
      expect((err as Error).message).toBe(`interceptor "boom" failed in ${stage}: kaput`)
      const error = events.find((e) => e.type === 'ERROR')
      expect(error?.attributes).toMatchObject({ source: 'interceptor', interceptor: 'boom', stage })
    },
  )

  it('a failure coming out of next passes through unchanged (not blamed on the outer layer)', async () => {
    const inner: AgentInterceptor = {
      name: 'inner',
      aroundToolCall: () => {
        throw new Error('inner broke')
      },
    }
    const outer: AgentInterceptor = { name: 'outer', aroundToolCall: (_c, next) => next() }
    const err = await createAgent({ model: twoStepModel(), tools: [echo], interceptors: [outer, inner] })
      .run('x')
      .catch((e: unknown) => e)
    expect(err).toMatchObject({ interceptor: 'inner', stage: 'aroundToolCall' })
  })

  it('an interceptor may recover from a model failure coming out of next', async () => {
    const fallback: AgentInterceptor = {
      name: 'fallback',
      async aroundLlmCall(_ctx, next) {
        try {
          return await next()
        } catch {
          return { text: 'fallback answer' }
        }
      },
    }
    const r = await createAgent({ model: scriptedModel([new Error('503')]), interceptors: [fallback] }).run(
      'x',
    )
    expect(r.output).toBe('fallback answer')
    expect(r.finishReason).toEqual({ kind: 'natural_stop' })
  })

  it('an interceptor cannot report a loop-owned finish reason', async () => {
    const liar: AgentInterceptor = {
      name: 'liar',
      aroundIteration: () => ({ kind: 'finish', output: 'x', finishReason: { kind: 'natural_stop' } }),
    }
    const err = await createAgent({ model: scriptedModel(['a']), interceptors: [liar] })
      .run('x')
      .catch((e: unknown) => e)
    expect(err).toMatchObject({ interceptor: 'liar', stage: 'aroundIteration' })
    expect((err as Error).message).toMatch(/loop-owned finish reason/)
  })

  it('an aroundIteration may end the run with a forced stop, or rewrite the output of the loop’s own finish', async () => {
    const stop: AgentInterceptor = {
      name: 'stop',
      aroundIteration: () => ({
        kind: 'finish',
        output: 'halted',
        finishReason: ForcedStop.custom('operator halt'),
      }),
    }
    const model = scriptedModel(['a'])
    const r1 = await createAgent({ model, interceptors: [stop] }).run('x')
    expect(r1.finishReason).toEqual({ kind: 'custom', reason: 'operator halt' })
    expect(model.calls).toBe(0)

    const upper: AgentInterceptor = {
      name: 'upper',
      async aroundIteration(_ctx, next) {
        const r = await next()
        return r.kind === 'finish' ? { ...r, output: r.output.toUpperCase() } : r
      },
    }
    const r2 = await createAgent({ model: scriptedModel(['quiet']), interceptors: [upper] }).run('x')
    expect(r2).toMatchObject({ output: 'QUIET', finishReason: { kind: 'natural_stop' } })
  })

  it('accepts interceptors without a name and names them by position in errors', async () => {
    const log: string[] = []
    const agent = createAgent({
      model: twoStepModel(),
      tools: [echo],
      interceptors: [
        { aroundIteration: (ctx, next) => (log.push('anonymous #1'), next()) },
        {
          aroundToolCall: () => {
            throw new Error('kaput')
          },
        },
      ],
    })
    const err = await agent.run('go').then(
      () => undefined,
      (e: unknown) => e,
    )
    expect(err).toBeInstanceOf(InterceptorError)
    expect((err as Error).message).toBe('interceptor "agent interceptor #2" failed in aroundToolCall: kaput')
    expect(log).toEqual(['anonymous #1'])
  })
})
