import { describe, expect, it } from 'vitest'
import { z } from 'zod'
import type { Tool } from '../../../src/agent/index.js'
import {
  AgentConfigError,
  createAgent,
  defineTool,
  scriptedModel,
  scriptedToolCall,
  shellTool,
} from '../../../src/agent/index.js'
import { delay } from '../../support/agent-doubles.js'

const add = defineTool({
  name: 'add',
  description: 'adds two numbers',
  parameters: z.object({ a: z.number().describe('first'), b: z.number() }),
  execute: ({ a, b }) => a + b,
})

/** A model that calls `calls` in one response, then answers 'done'. */
const callsThenDone = (...calls: ReturnType<typeof scriptedToolCall>[]) =>
  scriptedModel([{ toolCalls: calls }, 'done'])

describe('defineTool', () => {
  it('turns zod parameters into the JSON Schema offered to the model', () => {
    const agent = createAgent({ model: scriptedModel([]), tools: [add] })
    expect(agent.tools).toEqual([
      {
        name: 'add',
        description: 'adds two numbers',
        parameters: {
          type: 'object',
          properties: { a: { type: 'number', description: 'first' }, b: { type: 'number' } },
          required: ['a', 'b'],
        },
      },
    ])
  })

  it('accepts a JSON Schema object as is', () => {
    const schema = { type: 'object', properties: { q: { type: 'string' } }, required: ['q'] }
    const t = defineTool({
      name: 'search',
      description: 'd',
      parameters: schema,
      execute: (args: { q: string }) => args.q,
    })
    expect(createAgent({ model: scriptedModel([]), tools: [t] }).tools[0]?.parameters).toEqual(schema)
  })

  it('fails fast on bad definitions', () => {
    expect(() => defineTool({ name: 'has space', description: 'd', parameters: { type: 'object' } })).toThrow(
      AgentConfigError,
    )
    expect(() => defineTool({ name: 'x', description: 'd', parameters: { type: 'string' } })).toThrow(
      /must describe an object/,
    )
    expect(() => defineTool({ name: 'x', description: 'd', parameters: z.string() })).toThrow(
      /must describe an object/,
    )
    expect(() =>
      defineTool({ name: 'x', description: 'd', parameters: { type: 'object' }, timeoutMs: 0 }),
    ).toThrow(/timeoutMs/)
    expect(() => createAgent({ model: scriptedModel([]), tools: [add, add] })).toThrow(
      /duplicate tool name "add"/,
    )
  })

  it('shellTool has no local execute', () => {
    const bash = shellTool()
    expect(bash.name).toBe('bash')
    expect(bash.execute).toBeUndefined()
  })
})

describe('local tool calls', () => {
  it('validates zod arguments; a violation is an error result the model can read', async () => {
    const r = await createAgent({
      model: callsThenDone(scriptedToolCall('add', { a: 1, b: 'two' })),
      tools: [add],
    }).run('q')
    expect(r.toolCalls[0]).toMatchObject({ outcome: 'error', via: 'none' })
    expect(r.toolCalls[0]?.output).toMatch(/^error: BAD_REQUEST: invalid arguments for tool "add": b: /)
    expect(r.output).toBe('done')
  })

  it('invalid JSON arguments are an error result', async () => {
    const r = await createAgent({
      model: callsThenDone({ id: 'c', name: 'add', arguments: '{"a":' }),
      tools: [add],
    }).run('q')
    expect(r.toolCalls[0]?.output).toMatch(/^error: BAD_REQUEST: arguments of tool "add" are not valid JSON/)
  })

  it('an unknown tool is an error result naming the available tools, and the run goes on', async () => {
    const model = callsThenDone(scriptedToolCall('ad', { a: 1, b: 2 }, 'c9'))
    const r = await createAgent({ model, tools: [add] }).run('q')
    expect(r.toolCalls[0]).toMatchObject({ callId: 'c9', outcome: 'error', via: 'none' })
    expect(r.toolCalls[0]?.output).toBe(
      'error: NOT_FOUND: unknown tool "ad"; available tools: add. Call one of them by its exact name.',
    )
    expect(model.requests[1]?.messages.at(-1)).toEqual({
      role: 'tool',
      toolCallId: 'c9',
      name: 'ad',
      content: r.toolCalls[0]?.output,
    })
    expect(r.finishReason).toEqual({ kind: 'natural_stop' })
  })

  it('a shell-style tool without execute never runs on the host unless routed', async () => {
    const r = await createAgent({
      model: callsThenDone(scriptedToolCall('bash', { command: 'rm -rf /' })),
      tools: [shellTool()],
    }).run('q')
    expect(r.toolCalls[0]).toMatchObject({ outcome: 'error', via: 'none' })
    expect(r.toolCalls[0]?.output).toMatch(
      /has no local execute and no interceptor routed it, so it did not run/,
    )
  })

  it('returns strings verbatim, other values as JSON, nothing as empty', async () => {
    const obj = defineTool({
      name: 'obj',
      description: 'd',
      parameters: { type: 'object' },
      execute: () => ({ ok: true }),
    })
    const none = defineTool({
      name: 'none',
      description: 'd',
      parameters: { type: 'object' },
      execute: () => undefined,
    })
    const r = await createAgent({
      model: callsThenDone(
        scriptedToolCall('obj'),
        scriptedToolCall('none'),
        scriptedToolCall('add', { a: 2, b: 3 }),
      ),
      tools: [obj, none, add],
    }).run('q')
    expect(r.toolCalls.map((t) => t.output)).toEqual(['{"ok":true}', '', '5'])
  })

  it('a throwing tool is an error result', async () => {
    const bad = defineTool({
      name: 'bad',
      description: 'd',
      parameters: { type: 'object' },
      execute: () => {
        throw new Error('disk full')
      },
    })
    const r = await createAgent({ model: callsThenDone(scriptedToolCall('bad')), tools: [bad] }).run('q')
    expect(r.toolCalls[0]).toMatchObject({ output: 'error: disk full', outcome: 'error', via: 'local' })
  })

  it('passes the execute context: call id, session id, tenant and a signal', async () => {
    let seen: unknown
    const ctxTool = defineTool({
      name: 'ctx',
      description: 'd',
      parameters: { type: 'object' },
      execute: (_a, ctx) => {
        seen = {
          callId: ctx.callId,
          sessionId: ctx.sessionId,
          tenant: ctx.tenant,
          aborted: ctx.signal.aborted,
        }
      },
    })
    await createAgent({
      model: callsThenDone(scriptedToolCall('ctx', {}, 'k1')),
      tools: [ctxTool],
      tenant: 'acme',
    }).run('q', {
      sessionId: 's1',
    })
    expect(seen).toEqual({ callId: 'k1', sessionId: 's1', tenant: 'acme', aborted: false })
  })
})

describe('parallel tool calls and timeouts', () => {
  function sleeper(log: string[], inFlight: { now: number; max: number }): Tool {
    return defineTool({
      name: 'sleep',
      description: 'd',
      parameters: z.object({ ms: z.number(), id: z.string() }),
      execute: async ({ ms, id }) => {
        inFlight.now++
        inFlight.max = Math.max(inFlight.max, inFlight.now)
        await delay(ms)
        inFlight.now--
        log.push(id)
        return id
      },
    })
  }

  it('runs one response’s calls concurrently and returns results in the model’s order', async () => {
    const log: string[] = []
    const inFlight = { now: 0, max: 0 }
    const calls = [40, 25, 10, 1].map((ms, i) => scriptedToolCall('sleep', { ms, id: `t${i}` }, `c${i}`))
    const model = callsThenDone(...calls)
    const r = await createAgent({ model, tools: [sleeper(log, inFlight)] }).run('q')
    expect(log).toEqual(['t3', 't2', 't1', 't0'])
    expect(r.toolCalls.map((t) => t.output)).toEqual(['t0', 't1', 't2', 't3'])
    expect(
      model.requests[1]?.messages.slice(-4).map((m) => (m.role === 'tool' ? m.toolCallId : m.role)),
    ).toEqual(['c0', 'c1', 'c2', 'c3'])
    expect(inFlight.max).toBe(4)
  })

  it('bounds concurrency by maxParallelToolCalls', async () => {
    const inFlight = { now: 0, max: 0 }
    const calls = Array.from({ length: 6 }, (_, i) => scriptedToolCall('sleep', { ms: 5, id: `t${i}` }))
    await createAgent({
      model: callsThenDone(...calls),
      tools: [sleeper([], inFlight)],
      maxParallelToolCalls: 2,
    }).run('q')
    expect(inFlight.max).toBe(2)
  })

  it('runs calls one at a time, in order, with parallelToolCalls: false', async () => {
    const log: string[] = []
    const inFlight = { now: 0, max: 0 }
    const calls = [20, 1].map((ms, i) => scriptedToolCall('sleep', { ms, id: `t${i}` }))
    await createAgent({
      model: callsThenDone(...calls),
      tools: [sleeper(log, inFlight)],
      parallelToolCalls: false,
    }).run('q')
    expect(log).toEqual(['t0', 't1'])
    expect(inFlight.max).toBe(1)
  })

  it('a per-tool timeout turns a hung tool into an error result and aborts its signal', async () => {
    let aborted: Promise<unknown> | undefined
    const hang = defineTool({
      name: 'hang',
      description: 'd',
      parameters: { type: 'object' },
      timeoutMs: 30,
      execute: (_a, ctx) => {
        aborted = new Promise((resolve) =>
          ctx.signal.addEventListener('abort', () => resolve(ctx.signal.reason)),
        )
        return new Promise(() => {})
      },
    })
    const r = await createAgent({ model: callsThenDone(scriptedToolCall('hang')), tools: [hang] }).run('q')
    expect(r.toolCalls[0]).toMatchObject({ outcome: 'error', via: 'local' })
    expect(r.toolCalls[0]?.output).toBe(
      'error: UNAVAILABLE: tool "hang" timed out after 30 ms and was cancelled; try a smaller task or different arguments',
    )
    await expect(aborted).resolves.toMatchObject({ name: 'ToolCallError' })
    expect(r.output).toBe('done')
  })

  it('the agent-wide toolTimeoutMs applies to tools without their own', async () => {
    const hang = defineTool({
      name: 'hang',
      description: 'd',
      parameters: { type: 'object' },
      execute: () => new Promise(() => {}),
    })
    const r = await createAgent({
      model: callsThenDone(scriptedToolCall('hang')),
      tools: [hang],
      toolTimeoutMs: 20,
    }).run('q')
    expect(r.toolCalls[0]?.output).toMatch(/timed out after 20 ms/)
  })
})

describe('failures and cancellation during tool calls', () => {
  it('an interceptor failure in one parallel call aborts its siblings and fails the run', async () => {
    let siblingAborted: Promise<unknown> | undefined
    let started: () => void = () => {}
    const slowStarted = new Promise<void>((resolve) => (started = resolve))
    const slow = defineTool({
      name: 'slow',
      description: 'd',
      parameters: { type: 'object' },
      execute: (_a, ctx) => {
        siblingAborted = new Promise((resolve) => ctx.signal.addEventListener('abort', () => resolve(true)))
        started()
        return new Promise(() => {})
      },
    })
    const fast = defineTool({
      name: 'fast',
      description: 'd',
      parameters: { type: 'object' },
      execute: () => 'x',
    })
    const err = await createAgent({
      model: callsThenDone(scriptedToolCall('slow'), scriptedToolCall('fast')),
      tools: [slow, fast],
      toolInterceptors: [
        {
          name: 'picky',
          beforeToolCall: async (req) => {
            if (req.name === 'fast') {
              await slowStarted
              throw new Error('no fast tools')
            }
            return { kind: 'allow' }
          },
        },
      ],
    })
      .run('q')
      .catch((e: unknown) => e)
    expect(err).toMatchObject({ interceptor: 'picky', stage: 'beforeToolCall' })
    await expect(siblingAborted).resolves.toBe(true)
  })

  it('aborting the run signal cancels a running tool and rejects the run with the reason', async () => {
    const ac = new AbortController()
    let toolSignal: AbortSignal | undefined
    const hang = defineTool({
      name: 'hang',
      description: 'd',
      parameters: { type: 'object' },
      execute: (_a, ctx) => {
        toolSignal = ctx.signal
        ac.abort(new Error('stop now'))
        return new Promise(() => {})
      },
    })
    await expect(
      createAgent({ model: callsThenDone(scriptedToolCall('hang')), tools: [hang] }).run('q', {
        signal: ac.signal,
      }),
    ).rejects.toThrow('stop now')
    expect(toolSignal?.aborted).toBe(true)
  })
})
