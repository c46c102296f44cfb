import { describe, expect, test } from 'vitest'
import { ToolCallDecision, ToolResultDecision } from '../../../src/interceptors/index.js'
import type { ToolCallInterceptor, ToolCallRequest } from '../../../src/interceptors/index.js'
import { runToolCall } from '../../../src/routing/index.js'
import type { ToolCallEvent } from '../../../src/routing/index.js'

/*
 * The pipeline's contract without a sandbox: what each dispatch gives when nothing is routed, the
 * order of its events, and what propagates. Routed calls are covered end to end through the real
 * router (test/e2e/tool-call-pipeline.test.ts, test/integration/routing/routed-exec.test.ts).
 */
const call: ToolCallRequest = { name: 'echo', arguments: '{"text":"hi"}', callId: 'c1', type: 'function' }

const rewrite: ToolCallInterceptor = {
  name: 'rewrite',
  beforeToolCall: () => ToolCallDecision.allow(),
  afterToolCall: (_req, output) =>
    output.includes('WITHHOLD')
      ? ToolResultDecision.block('withheld')
      : ToolResultDecision.modify(output.toUpperCase()),
}

describe('runToolCall', () => {
  test('an allowed call without runLocal is left to the caller: no output, nothing ran', async () => {
    const r = await runToolCall(call, {}, { interceptors: [rewrite] })
    expect(r).toMatchObject({ output: undefined, outcome: 'ok', via: 'none', afterBlocked: false })
    expect(r.verdict.kind).toBe('allow')
  })

  test('a local run goes through the after-chain; a blocked output reads blocked: <reason>', async () => {
    const runLocal = async (c: ToolCallRequest) => ({
      output: `ran ${c.arguments}`,
      ok: true,
      executed: true,
    })
    const ok = await runToolCall(call, {}, { interceptors: [rewrite], runLocal })
    expect(ok).toMatchObject({
      output: 'RAN {"TEXT":"HI"}',
      outcome: 'ok',
      via: 'local',
      modifiedBy: ['rewrite'],
    })
    const withheld = await runToolCall(
      { ...call, arguments: 'WITHHOLD' },
      {},
      { interceptors: [rewrite], runLocal },
    )
    expect(withheld).toMatchObject({
      output: 'blocked: withheld',
      outcome: 'blocked',
      afterBlocked: true,
      decidedBy: 'rewrite',
    })
  })

  test('a local call that did not run (bad arguments) skips the after-chain', async () => {
    const runLocal = async () => ({ output: 'error: BAD_REQUEST: fix it', ok: false, executed: false })
    const r = await runToolCall(call, {}, { interceptors: [rewrite], runLocal })
    expect(r).toMatchObject({
      output: 'error: BAD_REQUEST: fix it',
      outcome: 'error',
      via: 'none',
      modifiedBy: [],
    })
  })

  test('a before-block reads blocked: <reason> and runs nothing', async () => {
    const deny: ToolCallInterceptor = {
      name: 'deny',
      beforeToolCall: () => ToolCallDecision.block('not here'),
    }
    let ran = false
    const r = await runToolCall(
      call,
      {},
      {
        interceptors: [deny, rewrite],
        runLocal: async () => {
          ran = true
          return { output: '', ok: true, executed: true }
        },
      },
    )
    expect(r).toMatchObject({
      output: 'blocked: not here',
      outcome: 'blocked',
      via: 'none',
      decidedBy: 'deny',
    })
    expect(ran).toBe(false)
  })

  test('routed without a router: an error result and an error event after the decided one, never a local run', async () => {
    const route: ToolCallInterceptor = {
      name: 'route',
      beforeToolCall: () => ToolCallDecision.routeTo('docker', 'default', 'echo hi'),
    }
    const events: ToolCallEvent['type'][] = []
    const r = await runToolCall(
      call,
      {},
      {
        interceptors: [route],
        runLocal: () => Promise.reject(new Error('must not run locally')),
        onEvent: (e) => void events.push(e.type),
      },
    )
    expect(r.output).toMatch(
      /^error: CONFIG_INVALID: tool call "echo" was routed to provider "docker" profile "default", but this agent has no router/,
    )
    expect(r).toMatchObject({ outcome: 'error', via: 'none' })
    expect(events).toEqual(['decided', 'error'])
  })

  test("an interceptor's exception propagates (a failing control interceptor fails the caller)", async () => {
    const broken: ToolCallInterceptor = {
      name: 'broken',
      beforeToolCall: () => {
        throw new Error('boom')
      },
    }
    await expect(runToolCall(call, {}, { interceptors: [broken] })).rejects.toThrow(/broken/)
  })
})
