import { describe, expect, it } from 'vitest'
import {
  BudgetInterceptor,
  createAgent,
  defineTool,
  scriptedModel,
  scriptedToolCall,
  shellTool,
} from '../../../src/agent/index.js'
import { AppError } from '../../../src/errors.js'
import type { ToolCallInterceptor } from '../../../src/interceptors/index.js'
import { ToolCallDecision, ToolResultDecision } from '../../../src/interceptors/index.js'
import { formatExecResult } from '../../../src/routing/tool-result.js'
import { execResult, recordingHook, TestRouter } from '../../support/agent-doubles.js'

/** Routes `bash` calls to docker/default with the `command` argument. */
const routeBash: ToolCallInterceptor = {
  name: 'route-bash',
  beforeToolCall: (req) =>
    req.name === 'bash'
      ? ToolCallDecision.routeTo(
          'docker',
          'default',
          (JSON.parse(req.arguments) as { command: string }).command,
        )
      : ToolCallDecision.allow(),
}
const bashCall = (command = 'ls -la', id = 'b1') =>
  scriptedModel([{ toolCalls: [scriptedToolCall('bash', { command }, id)] }, 'done'])

describe('routed tool calls', () => {
  it('go through the RouteExecutor and feed the stable exec-result text back to the model', async () => {
    const exec = execResult({ exitCode: 2, stdout: 'a\nb\n', stderr: 'warn\n' })
    const router = new TestRouter(() => exec)
    const model = bashCall()
    const r = await createAgent({
      model,
      tools: [shellTool({ timeoutMs: 5000 })],
      toolInterceptors: [routeBash],
      router,
      tenant: 'acme',
    }).run('q', { sessionId: 'sess-1' })
    expect(router.requests).toEqual([
      {
        providerId: 'docker',
        profile: 'default',
        command: 'ls -la',
        callId: 'b1',
        toolName: 'bash',
        sessionId: 'sess-1',
        tenant: 'acme',
        timeoutMs: 5000,
        // The agent's shell tool runs in the session's persistent shell where the provider has one.
        shellDefault: 'persistent',
      },
    ])
    expect(router.contexts[0]?.signal).toBeInstanceOf(AbortSignal)
    expect(r.toolCalls[0]).toMatchObject({
      via: 'routed',
      outcome: 'ok',
      decidedBy: 'route-bash',
      route: { kind: 'routeTo', providerId: 'docker', profile: 'default', command: 'ls -la' },
      exec,
    })
    expect(r.toolCalls[0]?.output).toBe('exit_code: 2\nstdout:\na\nb\nstderr:\nwarn')
    expect(model.requests[1]?.messages.at(-1)).toMatchObject({
      role: 'tool',
      toolCallId: 'b1',
      content: r.toolCalls[0]?.output,
    })
  })

  it('mark timed-out and truncated results in the text', async () => {
    const exec = execResult({
      exitCode: null,
      signal: 'SIGKILL',
      timedOut: true,
      truncated: true,
      stdout: 'partial',
    })
    const r = await createAgent({
      model: bashCall('sleep 99'),
      tools: [shellTool({ timeoutMs: 1000 })],
      toolInterceptors: [routeBash],
      router: new TestRouter(() => exec),
    }).run('q')
    expect(r.toolCalls[0]?.output).toBe(formatExecResult(exec, { timeoutMs: 1000 }))
    expect(r.toolCalls[0]?.output).toBe(
      'exit_code: null\nsignal: SIGKILL\n[timed out after 1000 ms; the process group was killed]\n[output truncated in the middle: past the output cap the head and the tail are kept, the bytes between are dropped where the output says so]\nstdout:\npartial\nstderr:\n(empty)',
    )
  })

  it('never fall back to local execution, even for a tool that has a local execute', async () => {
    let local = 0
    const bash = defineTool({
      name: 'bash',
      description: 'd',
      parameters: { type: 'object' },
      execute: () => ++local,
    })
    const router = new TestRouter(() => execResult({ stdout: 'sandboxed' }))
    const r = await createAgent({
      model: bashCall(),
      tools: [bash],
      toolInterceptors: [routeBash],
      router,
    }).run('q')
    expect(local).toBe(0)
    expect(r.toolCalls[0]?.output).toContain('sandboxed')
  })

  it('without a router end in a clear error result and an ERROR event, never running locally', async () => {
    let local = 0
    const bash = defineTool({
      name: 'bash',
      description: 'd',
      parameters: { type: 'object' },
      execute: () => ++local,
    })
    const { hook, events } = recordingHook()
    const r = await createAgent({
      model: bashCall(),
      tools: [bash],
      toolInterceptors: [routeBash],
      lifecycleHooks: [hook],
    }).run('q')
    expect(local).toBe(0)
    expect(r.toolCalls[0]).toMatchObject({ outcome: 'error', via: 'none' })
    expect(r.toolCalls[0]?.output).toMatch(
      /^error: CONFIG_INVALID: tool call "bash" was routed to provider "docker" profile "default", but this agent has no router, so it did not run/,
    )
    expect(r.output).toBe('done')
    const error = events.find((e) => e.type === 'ERROR')
    expect(error?.attributes).toMatchObject({
      source: 'router',
      code: 'CONFIG_INVALID',
      route: { providerId: 'docker' },
    })
  })

  it('an unknown provider or profile is a clear tool error plus an ERROR lifecycle event', async () => {
    const router = new TestRouter((route) => {
      throw new AppError(
        'UNKNOWN_PROVIDER',
        `unknown sandbox provider "${route.providerId}"; registered providers: docker, e2b`,
      )
    })
    const { hook, events } = recordingHook()
    const r = await createAgent({
      model: bashCall(),
      tools: [shellTool()],
      toolInterceptors: [
        { name: 'to-nowhere', beforeToolCall: () => ToolCallDecision.routeTo('nowhere', 'default', 'ls') },
      ],
      router,
      lifecycleHooks: [hook],
    }).run('q', { sessionId: 's1' })
    expect(r.toolCalls[0]).toMatchObject({ outcome: 'error', via: 'routed' })
    expect(r.toolCalls[0]?.output).toBe(
      'error: UNKNOWN_PROVIDER: unknown sandbox provider "nowhere"; registered providers: docker, e2b',
    )
    const error = events.find((e) => e.type === 'ERROR')
    expect(error).toMatchObject({ sessionId: 's1', step: 1 })
    expect(error?.attributes).toMatchObject({
      source: 'router',
      code: 'UNKNOWN_PROVIDER',
      callId: 'b1',
      route: { providerId: 'nowhere' },
    })
    expect(r.finishReason).toEqual({ kind: 'natural_stop' })
  })

  it('run the after-chain on routed output (redaction applies to sandbox results too)', async () => {
    const redact: ToolCallInterceptor = {
      name: 'redact',
      beforeToolCall: () => ToolCallDecision.allow(),
      afterToolCall: (_req, out) => ToolResultDecision.modify(out.replaceAll('hunter2', '[redacted]')),
    }
    const router = new TestRouter(() => execResult({ stdout: 'PASSWORD=hunter2\n' }))
    const r = await createAgent({
      model: bashCall('env'),
      tools: [shellTool()],
      toolInterceptors: [routeBash, redact],
      router,
    }).run('q')
    expect(r.toolCalls[0]?.output).toBe('exit_code: 0\nstdout:\nPASSWORD=[redacted]\nstderr:\n(empty)')
    expect(r.toolCalls[0]?.modifiedBy).toEqual(['redact'])
  })

  it('fire BEFORE_TOOL_CALL and AFTER_TOOL_CALL with the route in attributes', async () => {
    const { hook, events } = recordingHook()
    await createAgent({
      model: bashCall('pwd'),
      tools: [shellTool()],
      toolInterceptors: [routeBash],
      router: new TestRouter(() => execResult({ stdout: '/work\n' })),
      lifecycleHooks: [hook],
    }).run('q', { sessionId: 'abc' })
    const before = events.find((e) => e.type === 'BEFORE_TOOL_CALL')
    const after = events.find((e) => e.type === 'AFTER_TOOL_CALL')
    const route = { kind: 'routeTo', providerId: 'docker', profile: 'default', command: 'pwd' }
    expect(before).toMatchObject({
      message: 'bash',
      sessionId: 'abc',
      step: 1,
      attributes: { decision: 'routeTo', route },
    })
    expect(after).toMatchObject({
      message: 'bash',
      sessionId: 'abc',
      step: 1,
      attributes: { decision: 'routeTo', outcome: 'ok', via: 'routed', exitCode: 0, timedOut: false, route },
    })
    expect((after?.payload as { output: string }).output).toContain('/work')
  })
})

describe('sandbox time in usage and budgets', () => {
  it('adds up sandbox-seconds per provider that ran each call, and maxCost covers them', async () => {
    const calls = [1, 2, 3].map((i) => ({
      toolCalls: [scriptedToolCall('bash', { command: `c${i}` }, `b${i}`)],
    }))
    const model = scriptedModel([...calls, 'done'])
    // The first call runs on docker; the others on e2b, picked by a routing policy.
    let n = 0
    const router = new TestRouter(() =>
      ++n === 1
        ? execResult({ durationMs: 500 })
        : execResult({
            durationMs: 2_000,
            route: { policy: 'burst', providerId: 'e2b', profile: 'py', pinned: false, skipped: [] },
          }),
    )
    const r = await createAgent({
      model,
      tools: [shellTool()],
      toolInterceptors: [routeBash],
      router,
      interceptors: [new BudgetInterceptor({ maxCost: 0.01, sandboxPricePerSecond: { e2b: 0.004 } })],
    }).run('q')
    // After two calls: 0.5 s docker (unpriced) + 2 s e2b = 0.008; after three: 0.016 >= 0.01.
    expect(r.finishReason.kind).toBe('budget_exceeded')
    expect(r.sandboxSeconds).toEqual({ docker: 0.5, e2b: 4 })
  })

  it('maxCost needs a price table or sandbox prices', () => {
    expect(() => new BudgetInterceptor({ maxCost: 1 })).toThrow(/priceTable .*and\/or sandboxPricePerSecond/)
    expect(() => new BudgetInterceptor({ maxCost: 1, sandboxPricePerSecond: { docker: 0 } })).not.toThrow()
  })
})

describe('formatExecResult: a replaced sandbox', () => {
  const at = Date.UTC(2026, 11, 1)
  it('says the files are lost, or that a persistent workspace was kept', () => {
    const lost = formatExecResult({
      ...execResult(),
      sandboxReplaced: { at, reason: 'the sandbox vanished', filesLost: true, previousSandboxId: 'old' },
    })
    expect(lost).toContain(
      '[sandbox replaced at 2026-12-01T00:00:00.000Z: files from before are lost (the sandbox vanished)]',
    )
    const kept = formatExecResult({
      ...execResult(),
      sandboxReplaced: {
        at,
        reason: 'idle eviction',
        filesLost: true,
        previousSandboxId: 'old',
        workspaceKept: true,
      },
    })
    expect(kept).toContain(
      '[sandbox replaced at 2026-12-01T00:00:00.000Z: the workspace is kept, other files and processes from before are gone (idle eviction)]',
    )
  })
})
