/**
 * Agent-loop overhead per iteration: one scripted model call plus one local tool call per iteration,
 * run through `createAgent` with 0 and with 5 interceptors (budget, logging to a no-op sink, tracing
 * on the no-op global tracer, two pass-through interceptors on every stage + decide), against a
 * baseline that makes the same scripted model and tool calls directly (same process, interleaved
 * rounds, median). Bounded: fixed rounds and runs, ~10 s. Figures are CPU time of this process
 * (user + system, `process.cpuUsage`), so other load on the machine does not inflate them; the
 * wall-clock medians are printed alongside.
 *
 *   npx tsx bench/agent-loop.ts
 */
import type { AgentInterceptor, ModelRequest, ModelResponse } from '../src/agent/index.js'
import {
  BudgetInterceptor,
  createAgent,
  defineTool,
  LoggingInterceptor,
  scriptedModel,
  TracingInterceptor,
} from '../src/agent/index.js'

const ITERATIONS_PER_RUN = 20
const RUNS_PER_ROUND = 150
const ROUNDS = 11

const reply: ModelResponse = {
  text: '',
  toolCalls: [{ id: 'call_1', name: 'noop', arguments: '{"n":1}' }],
  usage: { inputTokens: 120, outputTokens: 12 },
  finishReason: 'tool_calls',
}
const execute = (args: { n: number }): string => `ok ${args.n}`
const noop = defineTool({
  name: 'noop',
  description: 'does nothing',
  parameters: { type: 'object', properties: { n: { type: 'number' } } },
  execute,
})

function passThrough(name: string): AgentInterceptor {
  return {
    name,
    aroundIteration: (_ctx, next) => next(),
    aroundLlmCall: (_ctx, next) => next(),
    aroundToolCall: (_ctx, next) => next(),
    decide: () => undefined,
  }
}

function fiveInterceptors(): AgentInterceptor[] {
  return [
    new BudgetInterceptor({ maxTotalTokens: Number.MAX_SAFE_INTEGER }),
    new LoggingInterceptor(() => {}),
    new TracingInterceptor(),
    passThrough('pass-a'),
    passThrough('pass-b'),
  ]
}

function agentFor(interceptors: AgentInterceptor[]) {
  return createAgent({
    model: scriptedModel([reply], { loop: true, record: false }),
    tools: [noop],
    interceptors,
    maxIterations: ITERATIONS_PER_RUN,
  })
}

interface Sample {
  cpu: number
  wall: number
}

/** CPU and wall-clock ns per iteration of one round of `fn`. */
async function measure(fn: () => Promise<void>): Promise<Sample> {
  const c0 = process.cpuUsage()
  const t0 = process.hrtime.bigint()
  await fn()
  const wall = Number(process.hrtime.bigint() - t0)
  const c = process.cpuUsage(c0)
  const n = RUNS_PER_ROUND * ITERATIONS_PER_RUN
  return { cpu: ((c.user + c.system) * 1000) / n, wall: wall / n }
}

/** One round through the agent loop. */
async function viaLoop(agent: ReturnType<typeof agentFor>): Promise<void> {
  for (let r = 0; r < RUNS_PER_ROUND; r++) {
    const res = await agent.run('go')
    if (res.iterations !== ITERATIONS_PER_RUN)
      throw new Error(`unexpected run: ${JSON.stringify(res.finishReason)}`)
  }
}

/** One round of the bare calls: the same model call per iteration and tool call per non-final iteration. */
async function bare(): Promise<void> {
  const model = scriptedModel([reply], { loop: true, record: false })
  const signal = new AbortController().signal
  const request: ModelRequest = { model: model.model, messages: [], tools: [], isLastIteration: false }
  for (let r = 0; r < RUNS_PER_ROUND; r++) {
    for (let i = 0; i < ITERATIONS_PER_RUN; i++) {
      const res = await model.generate(request, signal)
      if (i < ITERATIONS_PER_RUN - 1) {
        for (const c of res.toolCalls ?? []) await execute(JSON.parse(c.arguments) as { n: number })
      }
    }
  }
}

const median = (xs: number[]): number =>
  [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? Number.NaN

/** Runs the benchmark and returns the report lines. */
export async function benchAgentLoop(): Promise<string[]> {
  const plain = agentFor([])
  const wrapped = agentFor(fiveInterceptors())
  // Warm-up (JIT) before measuring.
  for (let i = 0; i < 2; i++) {
    await bare()
    await viaLoop(plain)
    await viaLoop(wrapped)
  }
  const samples: Record<'bare' | 'plain' | 'wrapped', Sample[]> = { bare: [], plain: [], wrapped: [] }
  for (let r = 0; r < ROUNDS; r++) {
    samples.bare.push(await measure(bare))
    samples.plain.push(await measure(() => viaLoop(plain)))
    samples.wrapped.push(await measure(() => viaLoop(wrapped)))
  }
  const cpu = (xs: Sample[]): number => median(xs.map((x) => x.cpu))
  const wall = (xs: Sample[]): number => median(xs.map((x) => x.wall))
  const base = cpu(samples.bare)
  const row = (label: string, xs: Sample[]): string =>
    `${label.padEnd(22)} ${cpu(xs).toFixed(0).padStart(9)}   ${`+${(cpu(xs) - base).toFixed(0)}`.padStart(9)}   ${wall(xs).toFixed(0).padStart(9)}`
  const extra = cpu(samples.wrapped) - cpu(samples.plain)
  return [
    `agent loop: ${ITERATIONS_PER_RUN} iterations per run (1 model call + 1 local tool call each; the last is the forced final), median of ${ROUNDS} interleaved rounds x ${RUNS_PER_ROUND} runs`,
    `${'ns per iteration'.padEnd(22)} ${'CPU'.padStart(9)}   ${'vs bare'.padStart(9)}   ${'wall'.padStart(9)}`,
    row('bare scripted calls', samples.bare),
    row('loop, 0 interceptors', samples.plain),
    row('loop, 5 interceptors', samples.wrapped),
    `5 interceptors add ${extra.toFixed(0)} ns CPU per iteration over the bare loop (${(extra / 5).toFixed(0)} ns each)`,
    'reference: a real model call is ~300,000,000 ns; a routed sandbox command ~1,000,000 ns',
  ]
}

if (import.meta.url === `file://${process.argv[1]}`) {
  for (const l of await benchAgentLoop()) console.log(l)
}
