import { assertNever } from '../errors.js'
import { evaluateToolCall, evaluateToolResult } from '../interceptors/chains.js'
import type { RouteToDecision } from '../interceptors/decisions.js'
import type { InterceptorContext, ToolCallRequest } from '../interceptors/types.js'
import { formatExecResult, formatToolError } from '../routing/tool-result.js'
import type { RouteRequest } from '../routing/types.js'
import type { ExecResult } from '../sandbox/types.js'
import type { AgentRun, AgentRunState, ToolCallOutcome, ToolCallRecord } from './agent-interceptor.js'
import type { AgentConfig } from './config.js'
import { ToolCallError } from './errors.js'
import type { RunEmitter } from './events.js'
import type { ModelToolCall } from './model-client.js'
import { checkRecord } from './layer-checks.js'
import { runOnion } from './onion.js'
import { NEVER_ABORTED } from './signals.js'
import { runLocalTool } from './tool-execution.js'

/** What the tool-call stage of one iteration needs from the run. */
export interface ToolCallScope {
  readonly cfg: AgentConfig
  readonly run: AgentRun
  readonly emitter: RunEmitter
  readonly ictx: InterceptorContext
  readonly iteration: number
  readonly state: AgentRunState
}

/** The outcome of dispatching one call (before the after-chain). */
interface Dispatched {
  output: string
  outcome: ToolCallOutcome
  via: ToolCallRecord['via']
  /** Whether something ran (local execute or router), so the after-chain applies. */
  executed: boolean
  exec?: ExecResult
}

/**
 * Runs the tool calls of one model response — concurrently up to the configured bound (1 when
 * `parallelToolCalls` is off) — and returns their records in the model's order. A failing
 * interceptor aborts the sibling calls and fails the run.
 */
export async function executeToolCalls(
  scope: ToolCallScope,
  calls: readonly ModelToolCall[],
  signal: AbortSignal,
): Promise<ToolCallRecord[]> {
  return mapBounded(calls, scope.cfg.toolConcurrency, signal, (call, s) => runToolCall(scope, call, s))
}

function runToolCall(
  scope: ToolCallScope,
  call: ModelToolCall,
  signal: AbortSignal,
): Promise<ToolCallRecord> {
  const request: ToolCallRequest = {
    name: call.name,
    arguments: call.arguments,
    callId: call.id,
    type: 'function',
  }
  const { run, iteration, state } = scope
  return runOnion(
    'aroundToolCall',
    scope.cfg.toolLayers,
    request,
    (c) => ({ run, iteration, call: c, state }),
    (c) => handleToolCall(scope, c, call.name, signal),
    checkRecord,
  )
}

/** Before-chain → block / local / routed → after-chain, with BEFORE/AFTER_TOOL_CALL events. */
async function handleToolCall(
  scope: ToolCallScope,
  request: ToolCallRequest,
  requestedName: string,
  signal: AbortSignal,
): Promise<ToolCallRecord> {
  const { cfg, emitter, iteration } = scope
  const started = performance.now()
  const ictx: InterceptorContext = signal === scope.ictx.signal ? scope.ictx : { ...scope.ictx, signal }
  const verdict = await evaluateToolCall(cfg.chains.toolCall, request, ictx)
  const call = verdict.request
  const route = verdict.kind === 'routeTo' ? verdict.route : undefined
  if (emitter.active)
    await emitter.emit('BEFORE_TOOL_CALL', iteration, call.name, call, {
      callId: call.callId,
      decision: verdict.kind,
      ...(route ? { route } : {}),
    })
  let d: Dispatched
  switch (verdict.kind) {
    case 'block':
      d = { output: `blocked: ${verdict.reason}`, outcome: 'blocked', via: 'none', executed: false }
      break
    case 'routeTo':
      d = await runRouted(scope, call, verdict.route, signal)
      break
    case 'allow':
      d = await runLocalTool(cfg, call, ictx, signal)
      break
    default:
      return assertNever(verdict)
  }
  let output = d.output
  let outcome = d.outcome
  let decidedBy = verdict.kind === 'allow' ? undefined : verdict.decidedBy
  let modifiedBy = verdict.modifiedBy
  if (d.executed && cfg.hasAfterToolCall) {
    const after = await evaluateToolResult(cfg.chains.toolCall, call, output, ictx)
    if (after.blocked) {
      output = `blocked: ${after.output}`
      outcome = 'blocked'
      decidedBy = after.decidedBy
    } else {
      output = after.output
    }
    if (after.modifiedBy.length > 0) modifiedBy = [...modifiedBy, ...after.modifiedBy]
  }
  // Built by assignment: conditional spreads are slow on this hot path.
  const record: { -readonly [K in keyof ToolCallRecord]: ToolCallRecord[K] } = {
    callId: call.callId,
    requestedName,
    name: call.name,
    arguments: call.arguments,
    output,
    outcome,
    via: d.via,
    modifiedBy,
    iteration,
    durationMs: Math.round((performance.now() - started) * 1000) / 1000,
  }
  if (route) record.route = route
  if (d.exec) record.exec = d.exec
  if (decidedBy !== undefined) record.decidedBy = decidedBy
  if (emitter.active)
    await emitter.emit('AFTER_TOOL_CALL', iteration, call.name, record, {
      callId: call.callId,
      decision: verdict.kind,
      outcome,
      via: d.via,
      durationMs: record.durationMs,
      ...(route ? { route } : {}),
      ...(d.exec
        ? { exitCode: d.exec.exitCode, timedOut: d.exec.timedOut, truncated: d.exec.truncated }
        : {}),
    })
  return record
}

/** Sends a routeTo verdict to the RouteExecutor; never falls back to local execution. */
async function runRouted(
  scope: ToolCallScope,
  call: ToolCallRequest,
  route: RouteToDecision,
  signal: AbortSignal,
): Promise<Dispatched> {
  const { cfg, run, emitter, iteration } = scope
  const attributes = { source: 'router', callId: call.callId, tool: call.name, route }
  if (!cfg.router) {
    const err = new ToolCallError(
      'CONFIG_INVALID',
      `tool call "${call.name}" was routed to provider "${route.providerId}" profile "${route.profile}", but this agent has no router, so it did not run (routed calls never fall back to local execution); pass createAgent({ router }) with the execution plane's RouteExecutor`,
    )
    await emitter.emit('ERROR', iteration, err.message, err, { ...attributes, code: err.code })
    return { output: formatToolError(err), outcome: 'error', via: 'none', executed: false }
  }
  const timeoutMs = cfg.tools.get(call.name)?.tool.timeoutMs
  const req: RouteRequest = {
    providerId: route.providerId,
    profile: route.profile,
    command: route.command,
    callId: call.callId,
    toolName: call.name,
    ...(run.sessionId !== undefined ? { sessionId: run.sessionId } : {}),
    ...(run.tenant !== undefined ? { tenant: run.tenant } : {}),
    ...(timeoutMs !== undefined ? { timeoutMs } : {}),
    shellDefault: 'persistent',
  }
  try {
    const exec = await cfg.router.execute(req, { signal })
    const output = formatExecResult(exec, timeoutMs !== undefined ? { timeoutMs } : {})
    return { output, outcome: 'ok', via: 'routed', executed: true, exec }
  } catch (err) {
    if (signal.aborted) throw signal.reason
    const code = (err as { code?: unknown } | null)?.code
    await emitter.emit('ERROR', iteration, `routed call "${call.name}" failed: ${errorMessage(err)}`, err, {
      ...attributes,
      ...(typeof code === 'string' ? { code } : {}),
    })
    return { output: formatToolError(err), outcome: 'error', via: 'routed', executed: true }
  }
}

function errorMessage(err: unknown): string {
  return err instanceof Error ? err.message : String(err)
}

/**
 * Maps `items` with at most `limit` calls in flight; results keep the input order. The first failure
 * aborts the others (through the signal passed to `fn`) and is re-thrown once all have settled.
 */
async function mapBounded<T, R>(
  items: readonly T[],
  limit: number,
  parent: AbortSignal,
  fn: (item: T, signal: AbortSignal) => Promise<R>,
): Promise<R[]> {
  if (items.length === 1) return [await fn(items[0] as T, parent)]
  const ac = new AbortController()
  const onAbort = (): void => ac.abort(parent.reason)
  const watchParent = parent !== NEVER_ABORTED
  if (parent.aborted) ac.abort(parent.reason)
  else if (watchParent) parent.addEventListener('abort', onAbort, { once: true })
  const results = new Array<R>(items.length)
  let nextIndex = 0
  let failure: { error: unknown } | undefined
  const worker = async (): Promise<void> => {
    while (failure === undefined && nextIndex < items.length) {
      const i = nextIndex++
      try {
        results[i] = await fn(items[i] as T, ac.signal)
      } catch (error) {
        if (failure === undefined) {
          failure = { error }
          ac.abort(error)
        }
      }
    }
  }
  try {
    await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker))
  } finally {
    if (watchParent) parent.removeEventListener('abort', onAbort)
  }
  if (failure) throw failure.error
  return results
}
