import { assertNever } from '../errors.js'
import type { InterceptorContext, ToolCallRequest } from '../interceptors/types.js'
import { runToolCall } from '../routing/tool-call-pipeline.js'
import type { ToolCallEvent } from '../routing/tool-call-pipeline.js'
import type { AgentRun, AgentRunState, ToolCallRecord } from './agent-interceptor.js'
import type { AgentConfig } from './config.js'
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
  return mapBounded(calls, scope.cfg.toolConcurrency, signal, (call, s) => runOneCall(scope, call, s))
}

function runOneCall(scope: ToolCallScope, call: ModelToolCall, signal: AbortSignal): Promise<ToolCallRecord> {
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

/** One call through the shared pipeline (`runToolCall`), with BEFORE/AFTER_TOOL_CALL and ERROR events. */
async function handleToolCall(
  scope: ToolCallScope,
  request: ToolCallRequest,
  requestedName: string,
  signal: AbortSignal,
): Promise<ToolCallRecord> {
  const { cfg, emitter, iteration } = scope
  const started = performance.now()
  const ictx: InterceptorContext = signal === scope.ictx.signal ? scope.ictx : { ...scope.ictx, signal }
  const r = await runToolCall(request, ictx, {
    interceptors: cfg.chains.toolCall,
    router: cfg.router,
    runLocal: async (call) => {
      const d = await runLocalTool(cfg, call, ictx, signal)
      return { output: d.output, ok: d.outcome === 'ok', executed: d.executed }
    },
    routeTimeoutMs: (call) => cfg.tools.get(call.name)?.tool.timeoutMs,
    onEvent: (e) => onPipelineEvent(scope, e),
  })
  const call = r.verdict.request
  const route = r.verdict.kind === 'routeTo' ? r.verdict.route : undefined
  // Built by assignment: conditional spreads are slow on this hot path.
  const record: { -readonly [K in keyof ToolCallRecord]: ToolCallRecord[K] } = {
    callId: call.callId,
    requestedName,
    name: call.name,
    arguments: call.arguments,
    // runLocal is given, so every outcome has its text.
    output: r.output ?? '',
    outcome: r.outcome,
    via: r.via,
    modifiedBy: r.modifiedBy,
    iteration,
    durationMs: Math.round((performance.now() - started) * 1000) / 1000,
  }
  if (route) record.route = route
  if (r.exec) record.exec = r.exec
  if (r.decidedBy !== undefined) record.decidedBy = r.decidedBy
  if (emitter.active)
    await emitter.emit('AFTER_TOOL_CALL', iteration, call.name, record, {
      callId: call.callId,
      decision: r.verdict.kind,
      outcome: r.outcome,
      via: r.via,
      durationMs: record.durationMs,
      ...(route ? { route } : {}),
      // Who ran it: a routing policy's pick (the verdict may name the policy), else the verdict's provider.
      ...(route ? { provider: r.exec?.route?.providerId ?? route.providerId } : {}),
      ...(r.exec?.route ? { policy: r.exec.route.policy } : {}),
      ...(r.exec
        ? { exitCode: r.exec.exitCode, timedOut: r.exec.timedOut, truncated: r.exec.truncated }
        : {}),
    })
  return record
}

/** BEFORE_TOOL_CALL when the before-chain decided; ERROR when a routed call failed. */
function onPipelineEvent(scope: ToolCallScope, e: ToolCallEvent): Promise<void> | undefined {
  const { emitter, iteration } = scope
  switch (e.type) {
    case 'decided': {
      // No promise when nobody listens: this runs on every call.
      if (!emitter.active) return undefined
      const { verdict } = e
      const call = verdict.request
      return emitter.emit('BEFORE_TOOL_CALL', iteration, call.name, call, {
        callId: call.callId,
        decision: verdict.kind,
        ...(verdict.kind === 'routeTo' ? { route: verdict.route } : {}),
      })
    }
    case 'error':
      return emitter.emit('ERROR', iteration, e.message, e.error, {
        source: 'router',
        callId: e.call.callId,
        tool: e.call.name,
        route: e.route,
        ...(e.code === undefined ? {} : { code: e.code }),
      })
    default:
      return assertNever(e)
  }
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
