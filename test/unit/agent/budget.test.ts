import { describe, expect, it } from 'vitest'
import type { LlmCallUsage, PriceTable, Usage } from '../../../src/agent/index.js'
import {
  AgentConfigError,
  BudgetInterceptor,
  costOfCalls,
  costOfUsage,
  createAgent,
  defineTool,
  DEFAULT_BUDGET_INSTRUCTION,
  normalizeUsage,
  scriptedModel,
  scriptedToolCall,
} from '../../../src/agent/index.js'
import { recordingHook } from '../../support/agent-doubles.js'

const u = (p: Partial<Usage>): Usage => normalizeUsage(p)
const call = (model: string, usage: Partial<Usage>): LlmCallUsage => ({
  model,
  requestedModel: model,
  iteration: 1,
  usage: u(usage),
})

const prices: PriceTable = {
  'gpt-4o-mini': { inputPerMTok: 0.15, outputPerMTok: 0.6 },
  'claude-x': { inputPerMTok: 3, outputPerMTok: 15, cachedInputPerMTok: 0.3, cacheWriteInputPerMTok: 3.75 },
}

const noop = defineTool({
  name: 'noop',
  description: 'd',
  parameters: { type: 'object' },
  execute: () => 'ok',
})

describe('BudgetInterceptor construction (fail fast)', () => {
  it('rejects a budget with no limit', () => {
    expect(() => new BudgetInterceptor({})).toThrow(AgentConfigError)
    expect(() => new BudgetInterceptor({})).toThrow(/at least one limit/)
  })
  it('rejects maxCost without a price table', () => {
    expect(() => new BudgetInterceptor({ maxCost: 2.5 })).toThrow(/maxCost needs a priceTable/)
  })
  it('rejects non-positive limits and negative prices', () => {
    expect(() => new BudgetInterceptor({ maxTotalTokens: 0 })).toThrow(/maxTotalTokens/)
    expect(() => new BudgetInterceptor({ maxTotalTokens: 1.5 })).toThrow(/maxTotalTokens/)
    expect(() => new BudgetInterceptor({ maxCost: -1, priceTable: prices })).toThrow(/maxCost/)
    expect(
      () => new BudgetInterceptor({ maxCost: 1, priceTable: { m: { inputPerMTok: -1, outputPerMTok: 1 } } }),
    ).toThrow(/priceTable/)
  })
  it('accepts a token limit alone, or a cost limit with prices', () => {
    expect(new BudgetInterceptor({ maxTotalTokens: 200_000 }).name).toBe('budget')
    expect(new BudgetInterceptor({ maxCost: 2.5, priceTable: prices }).maxCost).toBe(2.5)
  })
})

describe('cost', () => {
  it('prices plain input and output per million tokens', () => {
    expect(
      costOfUsage(u({ inputTokens: 1_000_000, outputTokens: 1_000_000 }), prices['gpt-4o-mini']!),
    ).toBeCloseTo(0.75, 10)
  })
  it('cached reads and cache writes default to the input rate', () => {
    const price = { inputPerMTok: 2, outputPerMTok: 8 }
    const withCache = u({
      inputTokens: 1_000_000,
      cachedInputTokens: 400_000,
      cacheWriteInputTokens: 100_000,
    })
    expect(costOfUsage(withCache, price)).toBeCloseTo(2, 10)
  })
  it('uses dedicated cache-read and cache-write rates (both subsets of input)', () => {
    // 500k plain @3 + 400k cached @0.3 + 100k written @3.75 + 200k out @15
    const usage = u({
      inputTokens: 1_000_000,
      cachedInputTokens: 400_000,
      cacheWriteInputTokens: 100_000,
      outputTokens: 200_000,
    })
    expect(costOfUsage(usage, prices['claude-x']!)).toBeCloseTo(1.5 + 0.12 + 0.375 + 3, 10)
  })
  it('sums calls of several models by provider-reported id; unknown models cost 0 and are listed', () => {
    const r = costOfCalls(
      [
        call('gpt-4o-mini', { inputTokens: 1_000_000 }),
        call('claude-x', { outputTokens: 1_000_000 }),
        call('mystery', { inputTokens: 9_000_000 }),
      ],
      prices,
    )
    expect(r.cost).toBeCloseTo(0.15 + 15, 10)
    expect(r.unpricedModels).toEqual(['mystery'])
    expect(costOfCalls([call('toString', { inputTokens: 5 })], prices).unpricedModels).toEqual(['toString'])
  })
})

describe('BudgetInterceptor in the loop', () => {
  it('is soft by one call: a breach ends the run at the next boundary with a counted, tool-free final', async () => {
    const step = { toolCalls: [scriptedToolCall('noop', {})], usage: { inputTokens: 100, outputTokens: 20 } }
    const model = scriptedModel([
      step,
      step,
      { text: 'final', usage: { inputTokens: 100, outputTokens: 20 } },
      'never',
    ])
    const r = await createAgent({
      model,
      tools: [noop],
      interceptors: [new BudgetInterceptor({ maxTotalTokens: 200 })],
    }).run('q')
    // 120 < 200 continues; 240 >= 200 forces the final at iteration 3.
    expect(model.requests.map((q) => q.tools.length > 0)).toEqual([true, true, false])
    expect(model.requests[2]?.messages.at(-1)).toEqual({ role: 'user', content: DEFAULT_BUDGET_INSTRUCTION })
    expect(r.finishReason).toEqual({ kind: 'budget_exceeded' })
    expect(r.output).toBe('final')
    expect(r.usage.totalTokens).toBe(360)
    expect(r.llmCalls).toHaveLength(3)
  })

  it('ends on cost with the provider-reported model id', async () => {
    const step = {
      toolCalls: [scriptedToolCall('noop', {})],
      model: 'gpt-4o-mini',
      usage: { inputTokens: 1_000_000 },
    }
    const model = scriptedModel([step, { text: 'done', model: 'gpt-4o-mini' }])
    const budget = new BudgetInterceptor({ maxCost: 0.1, priceTable: prices })
    const r = await createAgent({ model, tools: [noop], interceptors: [budget] }).run('q')
    expect(r.finishReason).toEqual({ kind: 'budget_exceeded' })
    expect(budget.costOf(r.llmCalls)).toBeCloseTo(0.15, 10)
    expect(r.warnings).toEqual([])
  })

  it('reports an unpriced model once per run as a warning event, counting it as 0', async () => {
    const step = { toolCalls: [scriptedToolCall('noop', {})], model: 'mystery-1', usage: { inputTokens: 10 } }
    const { hook, events } = recordingHook()
    const budget = new BudgetInterceptor({ maxCost: 1, priceTable: prices })
    const agent = createAgent({
      model: scriptedModel([step, step, { text: 'done', model: 'mystery-1' }], { loop: true }),
      tools: [noop],
      interceptors: [budget],
      lifecycleHooks: [hook],
    })
    const r = await agent.run('q')
    expect(r.finishReason).toEqual({ kind: 'natural_stop' })
    expect(r.llmCalls).toHaveLength(3)
    expect(r.warnings).toHaveLength(1)
    expect(r.warnings[0]).toMatchObject({ source: 'budget', attributes: { model: 'mystery-1' } })
    const warnings = events.filter((e) => e.type === 'ERROR' && e.attributes.severity === 'warning')
    expect(warnings).toHaveLength(1)
    expect(warnings[0]?.message).toMatch(/"mystery-1" is not in the BudgetInterceptor price table/)
    // A new run warns again (once per run).
    expect((await agent.run('again')).warnings).toHaveLength(1)
  })

  it('judges each run on its own usage', async () => {
    const agent = createAgent({
      model: scriptedModel([{ text: 'a', usage: { inputTokens: 150 } }], { loop: true }),
      interceptors: [new BudgetInterceptor({ maxTotalTokens: 200 })],
    })
    expect((await agent.run('1')).finishReason).toEqual({ kind: 'natural_stop' })
    expect((await agent.run('2')).finishReason).toEqual({ kind: 'natural_stop' })
  })
})
