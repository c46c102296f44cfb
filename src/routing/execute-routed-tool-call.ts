import { evaluateToolResult } from '../interceptors/chains.js'
import type { InterceptorContext, ToolCallInterceptor, ToolCallRequest } from '../interceptors/types.js'
import type { ExecResult } from '../sandbox/types.js'
import { formatExecResult, formatToolError } from './tool-result.js'
import type { RouteContext, RouteExecutor, RouteRequest } from './types.js'

/** Input of {@link executeRoutedToolCall}. */
export interface RoutedToolCallInput {
  readonly executor: RouteExecutor
  /** The tool-call chain (host first, then extensions); its `afterToolCall`s see the routed output. */
  readonly interceptors: readonly ToolCallInterceptor[]
  /** The (possibly rewritten) tool call the verdict was given for. */
  readonly request: ToolCallRequest
  readonly route: RouteRequest
  /** Live output and cancellation of the call. */
  readonly ctx?: RouteContext
  /** Context of the after-chain. @default { tenant, sessionId } of the route and `ctx.signal` */
  readonly interceptorContext?: InterceptorContext
}

/** What the model is fed for a routed call, and what produced it. */
export interface RoutedToolCallOutcome {
  /** The tool-result text after the after-chain (the block reason when an interceptor blocked). */
  readonly output: string
  /** The command's result, when it ran to completion (whatever its exit code). */
  readonly result?: ExecResult
  /** Why it did not (an AppError: JOB_INTERRUPTED, JOB_CANCELLED, UNKNOWN_PROFILE, ...). */
  readonly error?: unknown
  /** Whether an afterToolCall interceptor blocked the output. */
  readonly blocked: boolean
  /** The interceptor that blocked, when blocked. */
  readonly decidedBy?: string
  /** Interceptors that rewrote the output, in order. */
  readonly modifiedBy: readonly string[]
}

/**
 * Runs a routeTo verdict end to end for the agent and HTTP layers: execute through the router, format
 * the result (`formatExecResult`) or the failure (`formatToolError`) as the model-facing text, then run
 * the after-chain on it. Execution failures become tool output; an interceptor's exception propagates
 * (a failing control interceptor fails the run).
 */
export async function executeRoutedToolCall(input: RoutedToolCallInput): Promise<RoutedToolCallOutcome> {
  const { executor, route, ctx = {} } = input
  let result: ExecResult | undefined
  let error: unknown
  let text: string
  try {
    result = await executor.execute(route, ctx)
    text = formatExecResult(result, result.timedOut ? timeoutOf(executor, route) : {})
  } catch (err) {
    error = err
    text = formatToolError(err)
  }
  const icCtx: InterceptorContext = input.interceptorContext ?? {
    ...(route.tenant === undefined ? {} : { tenant: route.tenant }),
    ...(route.sessionId === undefined ? {} : { sessionId: route.sessionId }),
    ...(ctx.signal ? { signal: ctx.signal } : {}),
  }
  const verdict = await evaluateToolResult(input.interceptors, input.request, text, icCtx)
  return {
    output: verdict.output,
    ...(result ? { result } : {}),
    ...(error === undefined ? {} : { error }),
    blocked: verdict.blocked,
    ...(verdict.decidedBy === undefined ? {} : { decidedBy: verdict.decidedBy }),
    modifiedBy: verdict.modifiedBy,
  }
}

function timeoutOf(executor: RouteExecutor, route: RouteRequest): { timeoutMs?: number } {
  try {
    const ms = executor.effectiveTimeoutMs?.(route) ?? route.timeoutMs
    return ms === undefined ? {} : { timeoutMs: ms }
  } catch {
    return route.timeoutMs === undefined ? {} : { timeoutMs: route.timeoutMs }
  }
}
