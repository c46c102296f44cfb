import { describe, expect, it } from 'vitest'
import { z } from 'zod'
import { createAgent, defineTool, scriptedModel, scriptedToolCall } from '../../../src/agent/index.js'
import { defineExtension, ExtensionCapability, ExtensionRegistry } from '../../../src/extensions/index.js'
import type { ModelRequestView, ToolCallInterceptor } from '../../../src/interceptors/index.js'
import {
  InterceptorError,
  ModelRequestDecision,
  PromptDecision,
  ToolCallDecision,
  ToolResultDecision,
} from '../../../src/interceptors/index.js'
import { recordingHook } from '../../support/agent-doubles.js'

const echo = defineTool({
  name: 'echo',
  description: 'echoes',
  parameters: z.object({ text: z.string() }),
  execute: ({ text }) => `echo:${text}`,
})
const shout = defineTool({
  name: 'shout',
  description: 'shouts',
  parameters: z.object({ text: z.string() }),
  execute: ({ text }) => text.toUpperCase(),
})
const callThenDone = (name: string, args: unknown, id = 'c1') =>
  scriptedModel([{ toolCalls: [scriptedToolCall(name, args, id)] }, 'done'])

describe('prompt chain', () => {
  it('a block ends the run with PROMPT_BLOCKED: <reason> and no model call', async () => {
    const model = scriptedModel(['never'])
    const { hook, events } = recordingHook()
    const r = await createAgent({
      model,
      lifecycleHooks: [hook],
      promptInterceptors: [
        { name: 'guard', intercept: () => PromptDecision.block('contains a credit card number') },
      ],
    }).run('my card is 4111…')
    expect(model.calls).toBe(0)
    expect(r.output).toBe('PROMPT_BLOCKED: contains a credit card number')
    expect(r.finishReason).toEqual({
      kind: 'prompt_blocked',
      reason: 'contains a credit card number',
      blockedBy: 'guard',
    })
    expect(r).toMatchObject({ iterations: 0, llmCalls: [], toolCalls: [], messages: [] })
    expect(events.filter((e) => e.type === 'BEFORE_MODEL_REQUEST')).toEqual([])
  })

  it('a modify rewrites the input before it enters memory and the model; later interceptors see it', async () => {
    const model = scriptedModel(['ok'])
    const seen: string[] = []
    const r = await createAgent({
      model,
      promptInterceptors: [
        {
          name: 'redact',
          intercept: (req) => PromptDecision.modify(req.input.replace(/\d{3}-\d{4}/g, '[phone]')),
        },
        { name: 'spy', intercept: (req) => (seen.push(req.input), PromptDecision.allow()) },
      ],
    }).run('call me at 555-1234', { sessionId: 's' })
    expect(seen).toEqual(['call me at [phone]'])
    expect(model.requests[0]?.messages).toEqual([{ role: 'user', content: 'call me at [phone]' }])
    expect(r.messages[0]).toEqual({ role: 'user', content: 'call me at [phone]' })
  })
})

describe('model-request chain', () => {
  it('runs before every model call; the host output feeds the first extension; overrides stack', async () => {
    const views: ModelRequestView[] = []
    const ext = defineExtension({
      manifest: { id: 'tenant-pack', name: 'Tenant pack', capabilities: [ExtensionCapability.INTERCEPTOR] },
      apply(ctx) {
        ctx.interceptors.registerModelRequest({
          name: 'tenant-scope',
          intercept: (req) => {
            views.push(req)
            return ModelRequestDecision.withSystemPrompt('You are acme’s assistant.').merge(
              ModelRequestDecision.withMaxOutputTokens(2048),
            )
          },
        })
      },
    })
    const model = scriptedModel([{ toolCalls: [scriptedToolCall('echo', { text: 'a' })] }, 'done'])
    await createAgent({
      model,
      tools: [echo],
      systemPrompt: 'base prompt',
      temperature: 1,
      extensions: ExtensionRegistry.of(ext).enable('tenant-pack'),
      modelRequestInterceptors: [
        { name: 'host', intercept: () => ModelRequestDecision.withTemperature(0.2) },
      ],
    }).run('q')
    expect(views).toHaveLength(2)
    expect(views[0]).toMatchObject({ model: 'scripted', systemPrompt: 'base prompt', temperature: 0.2 })
    for (const req of model.requests) {
      expect(req).toMatchObject({
        systemPrompt: 'You are acme’s assistant.',
        temperature: 0.2,
        maxOutputTokens: 2048,
      })
    }
  })
})

describe('tool-call chains', () => {
  it('a block feeds the reason back as the tool result and does not execute', async () => {
    let ran = false
    const tool = defineTool({
      name: 'rm',
      description: 'd',
      parameters: { type: 'object' },
      execute: () => (ran = true),
    })
    const r = await createAgent({
      model: callThenDone('rm', {}),
      tools: [tool],
      toolInterceptors: [
        {
          name: 'deny-rm',
          beforeToolCall: () => ToolCallDecision.block('rm is not allowed here; use trash'),
        },
      ],
    }).run('q')
    expect(ran).toBe(false)
    expect(r.toolCalls[0]).toMatchObject({
      output: 'blocked: rm is not allowed here; use trash',
      outcome: 'blocked',
      via: 'none',
      decidedBy: 'deny-rm',
    })
  })

  it('a modify renames and rewrites arguments, keeps the callId, and the next interceptor sees the rewrite', async () => {
    const seen: string[] = []
    const r = await createAgent({
      model: callThenDone('echo', { text: 'hi' }, 'keep-me'),
      tools: [echo, shout],
      toolInterceptors: [
        {
          name: 'to-shout',
          beforeToolCall: () => ToolCallDecision.modify('shout', JSON.stringify({ text: 'louder' })),
        },
        {
          name: 'spy',
          beforeToolCall: (req) => (
            seen.push(`${req.name}:${req.arguments}:${req.callId}`),
            ToolCallDecision.allow()
          ),
        },
      ],
    }).run('q')
    expect(seen).toEqual(['shout:{"text":"louder"}:keep-me'])
    expect(r.toolCalls[0]).toMatchObject({
      callId: 'keep-me',
      requestedName: 'echo',
      name: 'shout',
      output: 'LOUDER',
      modifiedBy: ['to-shout'],
    })
    // The tool message answers the model's own call.
    expect(r.messages[2]).toEqual({ role: 'tool', toolCallId: 'keep-me', name: 'echo', content: 'LOUDER' })
  })

  it('the after-chain runs on local output: modify redacts, block replaces it with the reason', async () => {
    const redact: ToolCallInterceptor = {
      name: 'redact',
      beforeToolCall: () => ToolCallDecision.allow(),
      afterToolCall: (_req, out) => ToolResultDecision.modify(out.replace(/secret-\w+/g, '[redacted]')),
    }
    const r1 = await createAgent({
      model: callThenDone('echo', { text: 'token secret-abc' }),
      tools: [echo],
      toolInterceptors: [redact],
    }).run('q')
    expect(r1.toolCalls[0]).toMatchObject({
      output: 'echo:token [redacted]',
      outcome: 'ok',
      modifiedBy: ['redact'],
    })

    const leakGuard: ToolCallInterceptor = {
      name: 'leak-guard',
      beforeToolCall: () => ToolCallDecision.allow(),
      afterToolCall: (_req, out) =>
        out.includes('AKIA')
          ? ToolResultDecision.block('tool output contained a credential')
          : ToolResultDecision.allow(),
    }
    const r2 = await createAgent({
      model: callThenDone('echo', { text: 'AKIA123' }),
      tools: [echo],
      toolInterceptors: [leakGuard],
    }).run('q')
    expect(r2.toolCalls[0]).toMatchObject({
      output: 'blocked: tool output contained a credential',
      outcome: 'blocked',
      decidedBy: 'leak-guard',
    })
  })

  it('host interceptors run before extension interceptors, which run in registration order', async () => {
    const order: string[] = []
    const mk = (name: string): ToolCallInterceptor => ({
      name,
      beforeToolCall: () => (order.push(name), ToolCallDecision.allow()),
    })
    const ext = (id: string, names: string[]) =>
      defineExtension({
        manifest: { id, name: id, capabilities: [ExtensionCapability.INTERCEPTOR] },
        apply: (ctx) => names.forEach((n) => ctx.interceptors.registerToolCall(mk(n))),
      })
    await createAgent({
      model: callThenDone('echo', { text: 'x' }),
      tools: [echo],
      toolInterceptors: [mk('host')],
      extensions: ExtensionRegistry.of(ext('b-ext', ['b1']), ext('a-ext', ['a1', 'a2'])).enable(
        'a-ext',
        'b-ext',
      ),
    }).run('q')
    expect(order).toEqual(['host', 'a1', 'a2', 'b1'])
  })

  it('extension tools are offered namespaced and are callable under that name', async () => {
    const ext = defineExtension({
      manifest: { id: 'ask-user', name: 'Ask', capabilities: [ExtensionCapability.TOOL] },
      apply: (ctx) =>
        ctx.tools.register(
          defineTool({
            name: 'ask_user',
            description: 'asks',
            parameters: { type: 'object' },
            execute: () => 'yes',
          }),
        ),
    })
    const agent = createAgent({
      model: callThenDone('plugin__ask-user__ask_user', {}),
      tools: [echo],
      extensions: ExtensionRegistry.of(ext).enable('ask-user'),
    })
    expect(agent.tools.map((t) => t.name)).toEqual(['echo', 'plugin__ask-user__ask_user'])
    expect((await agent.run('q')).toolCalls[0]?.output).toBe('yes')
  })

  it('an exception in beforeToolCall fails the run with the interceptor and stage named', async () => {
    const err = await createAgent({
      model: callThenDone('echo', { text: 'x' }),
      tools: [echo],
      toolInterceptors: [
        {
          name: 'flaky',
          beforeToolCall: () => {
            throw new Error('policy store down')
          },
        },
      ],
    })
      .run('q')
      .catch((e: unknown) => e)
    expect(err).toBeInstanceOf(InterceptorError)
    expect(err).toMatchObject({ interceptor: 'flaky', stage: 'beforeToolCall' })
  })

  it('an exception in a prompt or model-request interceptor fails the run too', async () => {
    const p = await createAgent({
      model: scriptedModel(['x']),
      promptInterceptors: [{ name: 'p', intercept: () => Promise.reject(new Error('x')) }],
    })
      .run('q')
      .catch((e: unknown) => e)
    expect(p).toMatchObject({ interceptor: 'p', stage: 'prompt' })
    const m = await createAgent({
      model: scriptedModel(['x']),
      modelRequestInterceptors: [
        {
          name: 'm',
          intercept: () => {
            throw new Error('x')
          },
        },
      ],
    })
      .run('q')
      .catch((e: unknown) => e)
    expect(m).toMatchObject({ interceptor: 'm', stage: 'modelRequest' })
  })

  it('duplicate interceptor names fail fast at creation', () => {
    const a: ToolCallInterceptor = { name: 'same', beforeToolCall: () => ToolCallDecision.allow() }
    expect(() => createAgent({ model: scriptedModel([]), toolInterceptors: [a, a] })).toThrow(
      'duplicate tool-call interceptor id: same',
    )
    expect(() =>
      createAgent({ model: scriptedModel([]), interceptors: [{ name: 'x' }, { name: 'x' }] }),
    ).toThrow(/duplicate agent interceptor name: x/)
  })
})
