import { writeFileSync, mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { pathToFileURL } from 'node:url'
import { describe, expect, test } from 'vitest'
import {
  ExtensionCapability,
  ExtensionError,
  ExtensionRegistry,
  composeInterceptors,
  defineExtension,
  describeExtension,
  matchesToolName,
} from '../../../src/extensions/index.js'
import type { Extension } from '../../../src/extensions/index.js'
import { ToolCallDecision, evaluateToolCall } from '../../../src/interceptors/index.js'
import type { ToolCallInterceptor } from '../../../src/interceptors/index.js'

const allow = (name: string): ToolCallInterceptor => ({
  name,
  beforeToolCall: () => ToolCallDecision.allow(),
})

function ext(id: string, caps: ExtensionCapability[], apply: Extension['apply']): Extension {
  return defineExtension({ manifest: { id, name: id, capabilities: caps }, apply })
}

describe('capabilities', () => {
  test('seven members', () => {
    expect(Object.keys(ExtensionCapability)).toEqual([
      'TOOL',
      'COMMAND',
      'SKILL',
      'PROMPT',
      'GUARDRAIL',
      'LIFECYCLE',
      'INTERCEPTOR',
    ])
  })

  test('registering an interceptor without INTERCEPTOR throws the exact message', () => {
    const e = ext('no-caps', [ExtensionCapability.TOOL], (ctx) =>
      ctx.interceptors.registerToolCall(allow('x')),
    )
    const r = ExtensionRegistry.of(e).enable('no-caps')
    expect(() => r.snapshot()).toThrow(ExtensionError)
    expect(() => r.snapshot()).toThrow('did not declare capability: interceptor')
  })

  test('prompt and model-request registration need INTERCEPTOR too', () => {
    const p = ext('p', [], (ctx) =>
      ctx.interceptors.registerPrompt({ name: 'p', intercept: () => ({ kind: 'allow' }) }),
    )
    expect(() => ExtensionRegistry.of(p).enable('p').snapshot()).toThrow(
      'did not declare capability: interceptor',
    )
  })

  test('registering a lifecycle hook without LIFECYCLE throws', () => {
    const e = ext('hooky', [ExtensionCapability.INTERCEPTOR], (ctx) =>
      ctx.lifecycle.register({ name: 'h', onEvent() {} }),
    )
    expect(() => ExtensionRegistry.of(e).enable('hooky').snapshot()).toThrow(
      'did not declare capability: lifecycle',
    )
  })
})

describe('registry', () => {
  test('enable with an unknown id lists the known ids', () => {
    const r = ExtensionRegistry.of(
      ext('b', [], () => {}),
      ext('a', [], () => {}),
    )
    expect(() => r.enable('zzz')).toThrow('unknown extension id "zzz"; known ids: a, b')
  })

  test('extensions are inactive until enabled', () => {
    const r = ExtensionRegistry.of(
      ext('a', [ExtensionCapability.INTERCEPTOR], (c) => c.interceptors.registerToolCall(allow('a1'))),
    )
    expect(r.snapshot().toolCallInterceptors).toHaveLength(0)
    expect(
      r
        .enable('a')
        .snapshot()
        .toolCallInterceptors.map((i) => i.name),
    ).toEqual(['a1'])
  })

  test('interceptors run in registration order (enable order, then order within apply)', () => {
    const a = ext('a', [ExtensionCapability.INTERCEPTOR], (c) => {
      c.interceptors.registerToolCall(allow('a1'))
      c.interceptors.registerToolCall(allow('a2'))
    })
    const b = ext('b', [ExtensionCapability.INTERCEPTOR], (c) => c.interceptors.registerToolCall(allow('b1')))
    const snap = ExtensionRegistry.of(a, b).enable('b', 'a').snapshot()
    expect(snap.toolCallInterceptors.map((i) => i.name)).toEqual(['b1', 'a1', 'a2'])
  })

  test('duplicate interceptor names across extensions fail fast at snapshot()', () => {
    const a = ext('a', [ExtensionCapability.INTERCEPTOR], (c) =>
      c.interceptors.registerToolCall(allow('same')),
    )
    const b = ext('b', [ExtensionCapability.INTERCEPTOR], (c) =>
      c.interceptors.registerToolCall(allow('same')),
    )
    const r = ExtensionRegistry.of(a, b).enable('a', 'b')
    expect(() => r.snapshot()).toThrow('duplicate tool-call interceptor id: same')
  })

  test('the same name on different chains is fine', () => {
    const a = ext('a', [ExtensionCapability.INTERCEPTOR], (c) => {
      c.interceptors.registerToolCall(allow('same'))
      c.interceptors.registerPrompt({ name: 'same', intercept: () => ({ kind: 'allow' }) })
    })
    expect(ExtensionRegistry.of(a).enable('a').snapshot().promptInterceptors).toHaveLength(1)
  })

  test('duplicate between host and extension fails at composition', () => {
    const a = ext('a', [ExtensionCapability.INTERCEPTOR], (c) =>
      c.interceptors.registerToolCall(allow('dup')),
    )
    const snap = ExtensionRegistry.of(a).enable('a').snapshot()
    expect(() => composeInterceptors({ toolCall: [allow('dup')] }, snap)).toThrow(
      'duplicate tool-call interceptor id: dup',
    )
  })

  test('host interceptors run before extension interceptors', async () => {
    const order: string[] = []
    const track = (name: string): ToolCallInterceptor => ({
      name,
      beforeToolCall: () => (order.push(name), ToolCallDecision.allow()),
    })
    const a = ext('a', [ExtensionCapability.INTERCEPTOR], (c) =>
      c.interceptors.registerToolCall(track('ext')),
    )
    const chains = composeInterceptors(
      { toolCall: [track('host')] },
      ExtensionRegistry.of(a).enable('a').snapshot(),
    )
    await evaluateToolCall(chains.toolCall, { name: 'bash', arguments: '{}', callId: '1', type: 'function' })
    expect(order).toEqual(['host', 'ext'])
  })

  test('guardrails become blocking interceptors between host and extension interceptors', async () => {
    const g = ext('g', [ExtensionCapability.GUARDRAIL, ExtensionCapability.INTERCEPTOR], (c) => {
      c.interceptors.registerToolCall({
        name: 'later',
        beforeToolCall: () => ToolCallDecision.routeTo('docker', 'default', 'x'),
      })
      c.guardrails.register({
        name: 'no-rm',
        check: (r) =>
          r.arguments.includes('rm') ? { allow: false, reason: 'rm is not allowed' } : { allow: true },
      })
    })
    const chains = composeInterceptors(
      { toolCall: [allow('host')] },
      ExtensionRegistry.of(g).enable('g').snapshot(),
    )
    expect(chains.toolCall.map((i) => i.name)).toEqual(['host', 'guardrail:no-rm', 'later'])
    const v = await evaluateToolCall(chains.toolCall, {
      name: 'bash',
      arguments: '{"command":"rm -rf /"}',
      callId: '1',
      type: 'function',
    })
    expect(v).toMatchObject({ kind: 'block', reason: 'rm is not allowed' })
  })

  test('extension tools are namespaced plugin__<id>__<tool>', () => {
    const t = ext('ask-user', [ExtensionCapability.TOOL], (c) =>
      c.tools.register({ name: 'ask_user', description: 'asks', parameters: { type: 'object' } }),
    )
    const snap = ExtensionRegistry.of(t).enable('ask-user').snapshot()
    expect(snap.tools.map((x) => x.name)).toEqual(['plugin__ask-user__ask_user'])
    expect(matchesToolName('plugin__ask-user__ask_user', 'ask_user')).toBe(true)
    expect(matchesToolName('plugin__ask-user__ask_user', 'plugin__ask-user__ask_user')).toBe(true)
    expect(matchesToolName('ask_user', 'ask_user')).toBe(true)
    expect(matchesToolName('my_ask_user', 'ask_user')).toBe(false)
    expect(matchesToolName('plugin____bash', 'bash')).toBe(false)
  })

  test('manifests are validated at definition', () => {
    expect(() =>
      defineExtension({ manifest: { id: 'Bad Id', name: 'x', capabilities: [] }, apply() {} }),
    ).toThrow(/invalid extension manifest at "id"/)
    expect(() =>
      defineExtension({ manifest: { id: 'a__b', name: 'x', capabilities: [] }, apply() {} }),
    ).toThrow(/id/)
    expect(() =>
      defineExtension({ manifest: { id: 'ok', name: 'x', capabilities: ['teleport' as never] }, apply() {} }),
    ).toThrow(/capabilities/)
    expect(() =>
      ExtensionRegistry.of(
        ext('a', [], () => {}),
        ext('a', [], () => {}),
      ),
    ).toThrow('duplicate extension id: a')
  })

  test('an exception in apply names the extension', () => {
    const e = ext('broken', [], () => {
      throw new Error('kaput')
    })
    expect(() => ExtensionRegistry.of(e).enable('broken').snapshot()).toThrow(
      'extension "broken" failed in apply: kaput',
    )
  })

  test('load() imports modules whose default export is an extension', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'sbx-ext-'))
    const file = join(dir, 'audit.mjs')
    writeFileSync(
      file,
      `export default { manifest: { id: 'audit-pack', name: 'Audit', version: '1.0.0', vendor: 'example', capabilities: ['lifecycle'] },
         apply(ctx) { ctx.lifecycle.register({ name: 'audit.lifecycle', onEvent() {} }) } }`,
    )
    const bad = join(dir, 'bad.mjs')
    writeFileSync(bad, 'export const x = 1')
    const r = await ExtensionRegistry.of().load([pathToFileURL(file).href])
    expect(r.enabledIds()).toEqual(['audit-pack'])
    const applied = r.snapshot().extensions[0]
    if (!applied) throw new Error('no extension')
    const text = describeExtension(applied)
    expect(text).toContain('lifecycleHooks=1 (audit.lifecycle)')
    expect(text).toContain('capabilities=lifecycle')
    await expect(ExtensionRegistry.of().load([pathToFileURL(bad).href])).rejects.toThrow(
      /has no extension as its default export/,
    )
    await expect(ExtensionRegistry.of().load(['./does-not-exist.mjs'])).rejects.toThrow(
      /cannot load extension module/,
    )
  })
})
