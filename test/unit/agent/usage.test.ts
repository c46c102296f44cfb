import { describe, expect, it } from 'vitest'
import {
  createAgent,
  defineTool,
  emptyUsage,
  normalizeUsage,
  scriptedModel,
  scriptedToolCall,
} from '../../../src/agent/index.js'

const noop = defineTool({
  name: 'noop',
  description: 'd',
  parameters: { type: 'object' },
  execute: () => 'ok',
})

describe('usage accounting', () => {
  it('records usage per call with the provider-reported model id and accumulates it over the run', async () => {
    const model = scriptedModel(
      [
        {
          toolCalls: [scriptedToolCall('noop', {})],
          model: 'gpt-4o-mini-2024-07-18',
          usage: { inputTokens: 1000, outputTokens: 50, cachedInputTokens: 800, reasoningTokens: 10 },
        },
        {
          text: 'done',
          usage: { inputTokens: 1200, outputTokens: 30, totalTokens: 1300, cacheWriteInputTokens: 300 },
        },
      ],
      { model: 'gpt-4o-mini' },
    )
    const r = await createAgent({ model, tools: [noop] }).run('q')
    expect(r.llmCalls).toEqual([
      {
        model: 'gpt-4o-mini-2024-07-18',
        requestedModel: 'gpt-4o-mini',
        iteration: 1,
        usage: {
          inputTokens: 1000,
          outputTokens: 50,
          totalTokens: 1050,
          cachedInputTokens: 800,
          cacheWriteInputTokens: 0,
          reasoningTokens: 10,
        },
      },
      {
        // No provider-reported id: the requested one.
        model: 'gpt-4o-mini',
        requestedModel: 'gpt-4o-mini',
        iteration: 2,
        usage: {
          inputTokens: 1200,
          outputTokens: 30,
          totalTokens: 1300,
          cachedInputTokens: 0,
          cacheWriteInputTokens: 300,
          reasoningTokens: 0,
        },
      },
    ])
    expect(r.usage).toEqual({
      inputTokens: 2200,
      outputTokens: 80,
      totalTokens: 2350,
      cachedInputTokens: 800,
      cacheWriteInputTokens: 300,
      reasoningTokens: 10,
    })
  })

  it('a response without usage counts as zero', async () => {
    const r = await createAgent({ model: scriptedModel(['x']) }).run('q')
    expect(r.usage).toEqual(emptyUsage())
    expect(r.llmCalls[0]?.usage).toEqual(emptyUsage())
  })

  it('normalizeUsage fills gaps, defaults total to input + output and drops invalid counters', () => {
    expect(normalizeUsage({ inputTokens: 5, outputTokens: 7 })).toMatchObject({
      totalTokens: 12,
      cachedInputTokens: 0,
    })
    expect(normalizeUsage({ inputTokens: -3, outputTokens: Number.NaN })).toMatchObject({
      inputTokens: 0,
      outputTokens: 0,
      totalTokens: 0,
    })
    expect(normalizeUsage(undefined)).toEqual(emptyUsage())
  })

  it('the model-request chain’s model override is the requested model', async () => {
    const model = scriptedModel(['x'])
    const r = await createAgent({
      model,
      modelRequestInterceptors: [
        {
          name: 'pick',
          intercept: async () =>
            (await import('../../../src/interceptors/index.js')).ModelRequestDecision.withModel('big-model'),
        },
      ],
    }).run('q')
    expect(model.requests[0]?.model).toBe('big-model')
    expect(r.llmCalls[0]).toMatchObject({ model: 'big-model', requestedModel: 'big-model' })
  })
})
