import { describe, expect, test } from 'vitest'
import {
  InterceptorError,
  ModelRequestDecision,
  PromptDecision,
  ToolCallDecision,
  ToolResultDecision,
  evaluateModelRequest,
  evaluatePrompt,
  evaluateToolCall,
  evaluateToolResult,
} from '../../../src/interceptors/index.js'
import type {
  ModelRequestInterceptor,
  PromptInterceptor,
  ToolCallInterceptor,
  ToolCallRequest,
} from '../../../src/interceptors/index.js'

const req: ToolCallRequest = {
  name: 'bash',
  arguments: '{"command":"ls"}',
  callId: 'call-1',
  type: 'function',
  metadata: { origin: 'test' },
}

function tool(
  name: string,
  before: ToolCallInterceptor['beforeToolCall'],
  after?: ToolCallInterceptor['afterToolCall'],
): ToolCallInterceptor {
  return after ? { name, beforeToolCall: before, afterToolCall: after } : { name, beforeToolCall: before }
}

describe('decision factories', () => {
  test('plain objects with a kind', () => {
    expect(ToolCallDecision.allow()).toEqual({ kind: 'allow' })
    expect(ToolCallDecision.block('no')).toEqual({ kind: 'block', reason: 'no' })
    expect(ToolCallDecision.modify(null, '{}')).toEqual({ kind: 'modify', arguments: '{}' })
    expect(ToolCallDecision.modify('sh', '{}')).toEqual({ kind: 'modify', name: 'sh', arguments: '{}' })
    expect(ToolCallDecision.routeTo('docker', 'default', 'ls')).toEqual({
      kind: 'routeTo',
      providerId: 'docker',
      profile: 'default',
      command: 'ls',
    })
    expect(PromptDecision.modify('x')).toEqual({ kind: 'modify', input: 'x' })
    expect(ToolResultDecision.modify('out')).toEqual({ kind: 'modify', output: 'out' })
  })

  test('empty reasons and route parts are rejected', () => {
    expect(() => ToolCallDecision.block('')).toThrow(/block reason/)
    expect(() => ToolCallDecision.routeTo('', 'p', 'ls')).toThrow(/providerId/)
    expect(() => ToolCallDecision.routeTo('docker', 'p', '')).toThrow(/command/)
    expect(() => ModelRequestDecision.withMaxOutputTokens(0)).toThrow(/positive integer/)
    expect(() => ModelRequestDecision.withTemperature(Number.NaN)).toThrow(/finite/)
  })

  test('merge: the argument’s set fields win, unset fields keep', () => {
    const a = ModelRequestDecision.withSystemPrompt('A').merge(ModelRequestDecision.withTemperature(0.2))
    const b = ModelRequestDecision.withTemperature(0.9).merge(ModelRequestDecision.withMaxOutputTokens(100))
    expect(a.merge(b).overrides).toEqual({ systemPrompt: 'A', temperature: 0.9, maxOutputTokens: 100 })
    expect(b.merge(a).overrides).toEqual({ systemPrompt: 'A', temperature: 0.2, maxOutputTokens: 100 })
    expect(ModelRequestDecision.allow().isAllow).toBe(true)
    expect(a.merge(ModelRequestDecision.allow()).overrides).toEqual(a.overrides)
  })
})

describe('tool-call chain', () => {
  test('a blocked call never reaches later interceptors', async () => {
    const seen: string[] = []
    const chain = [
      tool('a', () => (seen.push('a'), ToolCallDecision.block('denied'))),
      tool('b', () => (seen.push('b'), ToolCallDecision.allow())),
    ]
    const v = await evaluateToolCall(chain, req)
    expect(v).toMatchObject({ kind: 'block', reason: 'denied', decidedBy: 'a' })
    expect(seen).toEqual(['a'])
  })

  test('routeTo short-circuits and carries the effective request', async () => {
    const seen: string[] = []
    const chain = [
      tool('pin', (r) => (seen.push('pin'), ToolCallDecision.modify(null, r.arguments.replace('ls', 'pwd')))),
      tool('route', () => (seen.push('route'), ToolCallDecision.routeTo('docker', 'default', 'pwd'))),
      tool('late', () => (seen.push('late'), ToolCallDecision.block('never'))),
    ]
    const v = await evaluateToolCall(chain, req)
    expect(seen).toEqual(['pin', 'route'])
    expect(v.kind).toBe('routeTo')
    if (v.kind !== 'routeTo') throw new Error('unreachable')
    expect(v.route).toEqual({ kind: 'routeTo', providerId: 'docker', profile: 'default', command: 'pwd' })
    expect(v.request.arguments).toBe('{"command":"pwd"}')
    expect(v.modifiedBy).toEqual(['pin'])
  })

  test('chained modifies apply in order and each sees the current value', async () => {
    const inputs: string[] = []
    const chain = [
      tool('one', (r) => (inputs.push(r.arguments), ToolCallDecision.modify('sh', '{"n":1}'))),
      tool('two', (r) => (inputs.push(`${r.name}:${r.arguments}`), ToolCallDecision.modify(null, '{"n":2}'))),
      tool('three', (r) => (inputs.push(`${r.name}:${r.arguments}`), ToolCallDecision.allow())),
    ]
    const v = await evaluateToolCall(chain, req)
    expect(inputs).toEqual(['{"command":"ls"}', 'sh:{"n":1}', 'sh:{"n":2}'])
    expect(v).toMatchObject({ kind: 'allow', modifiedBy: ['one', 'two'] })
  })

  test('modify(null, args) keeps the name and preserves callId, type and metadata', async () => {
    const v = await evaluateToolCall([tool('m', () => ToolCallDecision.modify(null, '{"x":1}'))], req)
    expect(v.request).toEqual({ ...req, arguments: '{"x":1}' })
  })

  test('async interceptors are awaited in order', async () => {
    const order: string[] = []
    const chain = [
      tool('slow', async () => {
        await new Promise((r) => setImmediate(r))
        order.push('slow')
        return ToolCallDecision.allow()
      }),
      tool('fast', () => (order.push('fast'), ToolCallDecision.allow())),
    ]
    await evaluateToolCall(chain, req)
    expect(order).toEqual(['slow', 'fast'])
  })

  test('an exception is wrapped with the interceptor and stage, original as cause', async () => {
    const boom = new Error('boom')
    const err = await evaluateToolCall(
      [
        tool('bad', () => {
          throw boom
        }),
      ],
      req,
    ).catch((e: unknown) => e)
    expect(err).toBeInstanceOf(InterceptorError)
    expect((err as InterceptorError).message).toBe('interceptor "bad" failed in beforeToolCall: boom')
    expect((err as InterceptorError).cause).toBe(boom)
    expect((err as InterceptorError).interceptor).toBe('bad')
    expect((err as InterceptorError).stage).toBe('beforeToolCall')
  })

  test('a rejected promise is wrapped the same way', async () => {
    const err = await evaluateToolCall([tool('rej', () => Promise.reject(new Error('nope')))], req).catch(
      (e: unknown) => e,
    )
    expect((err as InterceptorError).message).toBe('interceptor "rej" failed in beforeToolCall: nope')
  })

  test('a non-decision return value fails clearly', async () => {
    const bad = tool('undef', () => undefined as never)
    await expect(evaluateToolCall([bad], req)).rejects.toThrow(
      /interceptor "undef" failed in beforeToolCall: returned an invalid decision/,
    )
  })

  test('an aborted signal stops the chain', async () => {
    const ac = new AbortController()
    ac.abort(new Error('cancelled'))
    await expect(
      evaluateToolCall([tool('a', () => ToolCallDecision.allow())], req, { signal: ac.signal }),
    ).rejects.toThrow('cancelled')
  })
})

describe('after-tool-call chain', () => {
  test('modify feeds downstream, block replaces the output and stops', async () => {
    const seen: string[] = []
    const chain = [
      tool('noop', () => ToolCallDecision.allow()),
      tool(
        'redact',
        () => ToolCallDecision.allow(),
        (_r, out) => (seen.push(out), ToolResultDecision.modify(out.replace('secret', '***'))),
      ),
      tool(
        'guard',
        () => ToolCallDecision.allow(),
        (_r, out) => (
          seen.push(out),
          out.includes('***') ? ToolResultDecision.block('withheld') : ToolResultDecision.allow()
        ),
      ),
      tool(
        'late',
        () => ToolCallDecision.allow(),
        (_r, out) => (seen.push(out), ToolResultDecision.allow()),
      ),
    ]
    const v = await evaluateToolResult(chain, req, 'my secret')
    expect(seen).toEqual(['my secret', 'my ***'])
    expect(v).toEqual({ output: 'withheld', blocked: true, decidedBy: 'guard', modifiedBy: ['redact'] })
  })

  test('without afterToolCall hooks the output is unchanged', async () => {
    const v = await evaluateToolResult([tool('a', () => ToolCallDecision.allow())], req, 'out')
    expect(v).toEqual({ output: 'out', blocked: false, modifiedBy: [] })
  })

  test('an exception names the afterToolCall stage', async () => {
    const chain = [
      tool(
        'x',
        () => ToolCallDecision.allow(),
        () => {
          throw new Error('bad output')
        },
      ),
    ]
    await expect(evaluateToolResult(chain, req, 'o')).rejects.toThrow(
      'interceptor "x" failed in afterToolCall: bad output',
    )
  })
})

describe('prompt chain', () => {
  const p = (name: string, f: PromptInterceptor['intercept']): PromptInterceptor => ({ name, intercept: f })

  test('modify feeds downstream; block stops', async () => {
    const seen: string[] = []
    const v = await evaluatePrompt(
      [
        p('upper', (r) => (seen.push(r.input), PromptDecision.modify(r.input.toUpperCase()))),
        p(
          'block',
          (r) => (
            seen.push(r.input),
            r.input.includes('DROP') ? PromptDecision.block('injection') : PromptDecision.allow()
          ),
        ),
        p('late', (r) => (seen.push(r.input), PromptDecision.allow())),
      ],
      { input: 'please drop tables', sessionId: 's' },
    )
    expect(seen).toEqual(['please drop tables', 'PLEASE DROP TABLES'])
    expect(v).toEqual({ kind: 'block', reason: 'injection', decidedBy: 'block' })
  })

  test('allow returns the effective input', async () => {
    const v = await evaluatePrompt([p('trim', (r) => PromptDecision.modify(r.input.trim()))], {
      input: '  hi ',
    })
    expect(v).toEqual({ kind: 'allow', input: 'hi', modifiedBy: ['trim'] })
  })
})

describe('model-request chain', () => {
  const m = (name: string, f: ModelRequestInterceptor['intercept']): ModelRequestInterceptor => ({
    name,
    intercept: f,
  })

  test("the host's output is the first extension's input; overrides stack", async () => {
    const seen: unknown[] = []
    const v = await evaluateModelRequest(
      [
        m(
          'host',
          (r) => (
            seen.push({ ...r }),
            ModelRequestDecision.withModel('big').merge(ModelRequestDecision.withTemperature(1))
          ),
        ),
        m(
          'ext1',
          (r) => (
            seen.push({ ...r }),
            ModelRequestDecision.withTemperature(Math.min(r.temperature ?? 1, 0.5))
          ),
        ),
        m('ext2', (r) => (seen.push({ ...r }), ModelRequestDecision.allow())),
      ],
      { model: 'small', temperature: 0.7 },
    )
    expect(seen).toEqual([
      { model: 'small', temperature: 0.7 },
      { model: 'big', temperature: 1 },
      { model: 'big', temperature: 0.5 },
    ])
    expect(v.request).toEqual({ model: 'big', temperature: 0.5 })
    expect(v.decision.overrides).toEqual({ model: 'big', temperature: 0.5 })
  })

  test('a non-decision return fails with the interceptor named', async () => {
    await expect(evaluateModelRequest([m('bad', () => ({}) as never)], { model: 'x' })).rejects.toThrow(
      /interceptor "bad" failed in modelRequest/,
    )
  })
})
