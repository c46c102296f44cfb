import { describe, expect, it } from 'vitest'
import type { ModelClient } from '../../../src/agent/index.js'
import { AgentConfigError, createAgent, ModelCallError, scriptedModel } from '../../../src/agent/index.js'
import { AppError } from '../../../src/errors.js'

describe('createAgent', () => {
  it('fails fast on invalid options, saying what to fix', () => {
    expect(() => createAgent({} as never)).toThrow(/createAgent needs \{ model \}/)
    expect(() => createAgent({ model: scriptedModel([]), maxIterations: 0 })).toThrow(
      /maxIterations must be a positive integer/,
    )
    expect(() => createAgent({ model: scriptedModel([]), maxParallelToolCalls: 1.5 })).toThrow(
      AgentConfigError,
    )
    expect(() => createAgent({ model: scriptedModel([]), interceptors: [{ name: '' }] })).toThrow(
      /agent interceptor #1: name must be a non-empty string, or left out/,
    )
    expect(() => createAgent({ model: scriptedModel([]), interceptors: [{}, null as never] })).toThrow(
      /agent interceptor #2 is not an object/,
    )
    expect(() => createAgent({ model: scriptedModel([]), router: {} as never })).toThrow(/RouteExecutor/)
    expect(() => createAgent({ model: { ...scriptedModel([]), model: '' } })).toThrow(/default model id/)
  })

  it('passes the request fields through to the model', async () => {
    const model = scriptedModel(['ok'])
    await createAgent({
      model,
      systemPrompt: 'sys',
      instructions: 'ins',
      temperature: 0.3,
      topP: 0.9,
      maxOutputTokens: 77,
    }).run('q')
    expect(model.requests[0]).toMatchObject({
      model: 'scripted',
      systemPrompt: 'sys',
      instructions: 'ins',
      temperature: 0.3,
      topP: 0.9,
      maxOutputTokens: 77,
      tools: [],
      isLastIteration: false,
    })
  })

  it('continues from a given history', async () => {
    const model = scriptedModel(['ok'])
    const r = await createAgent({ model }).run('next', {
      history: [
        { role: 'user', content: 'before' },
        { role: 'assistant', content: 'yes' },
      ],
    })
    expect(model.requests[0]?.messages).toHaveLength(3)
    expect(r.messages).toHaveLength(4)
  })

  it('a model client error becomes finishReason error with the client’s code and message', async () => {
    const client: ModelClient = {
      model: 'm',
      generate: () =>
        Promise.reject(new AppError('RATE_LIMITED', 'rate limited by the provider; retry later')),
    }
    const r = await createAgent({ model: client }).run('q')
    expect(r.finishReason).toEqual({
      kind: 'error',
      message: 'model call failed: rate limited by the provider; retry later',
      code: 'RATE_LIMITED',
    })
    expect(r.output).toBe('')
  })

  it('a response with finishReason error ends the run with that message', async () => {
    const r = await createAgent({
      model: scriptedModel([{ text: 'upstream said no', finishReason: 'error' }]),
    }).run('q')
    expect(r.finishReason).toEqual({ kind: 'error', message: 'upstream said no', code: 'UNAVAILABLE' })
  })

  it('an aborted signal rejects the run with its reason', async () => {
    const ac = new AbortController()
    const model = scriptedModel([
      () => {
        ac.abort(new Error('user cancelled'))
        return new Promise(() => {})
      },
    ])
    const never: ModelClient = {
      model: 'm',
      generate: (req, signal) =>
        new Promise((_resolve, reject) => {
          signal.addEventListener('abort', () => reject(signal.reason))
          void model.generate(req, signal)
        }),
    }
    await expect(createAgent({ model: never }).run('q', { signal: ac.signal })).rejects.toThrow(
      'user cancelled',
    )
    const pre = new AbortController()
    pre.abort(new Error('too late'))
    await expect(
      createAgent({ model: scriptedModel(['x']) }).run('q', { signal: pre.signal }),
    ).rejects.toThrow('too late')
  })
})

describe('scriptedModel', () => {
  it('replays text, responses, functions and errors in order, recording requests', async () => {
    const model = scriptedModel(
      ['a', { text: 'b', model: 'm2' }, (req, i) => `${req.messages.length}:${i}`, new Error('x')],
      { model: 'demo' },
    )
    const signal = new AbortController().signal
    const req = {
      model: 'demo',
      messages: [{ role: 'user' as const, content: 'hi' }],
      tools: [],
      isLastIteration: false,
    }
    expect(await model.generate(req, signal)).toEqual({ text: 'a', finishReason: 'stop' })
    expect(await model.generate(req, signal)).toEqual({ text: 'b', model: 'm2' })
    expect(await model.generate(req, signal)).toEqual({ text: '1:2', finishReason: 'stop' })
    await expect(model.generate(req, signal)).rejects.toThrow('x')
    expect(model.requests).toHaveLength(4)
    expect(model.model).toBe('demo')
  })

  it('running out of replies is a ModelCallError that says how to fix it; loop starts over', async () => {
    const signal = new AbortController().signal
    const req = { model: 'm', messages: [], tools: [], isLastIteration: false }
    const once = scriptedModel(['only'])
    await once.generate(req, signal)
    await expect(once.generate(req, signal)).rejects.toThrow(ModelCallError)
    await expect(once.generate(req, signal)).rejects.toThrow(/add more steps or pass \{ loop: true \}/)
    const looping = scriptedModel(['x', 'y'], { loop: true, record: false })
    const texts = []
    for (let i = 0; i < 5; i++) texts.push((await looping.generate(req, signal)).text)
    expect(texts).toEqual(['x', 'y', 'x', 'y', 'x'])
    expect(looping.requests).toHaveLength(0)
  })

  it('an exhausted script ends a run with finishReason error', async () => {
    const r = await createAgent({ model: scriptedModel([]) }).run('q')
    expect(r.finishReason.kind).toBe('error')
  })
})
