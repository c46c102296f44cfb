import { assertNever } from '../errors.js'
import { evaluateToolCall, evaluateToolResult } from '../interceptors/chains.js'
import type { ToolCallVerdict } from '../interceptors/chains.js'
import type { RouteToDecision } from '../interceptors/decisions.js'
import type { InterceptorContext, ToolCallInterceptor, ToolCallRequest } from '../interceptors/types.js'
import type { ExecResult } from '../sandbox/types.js'
import { routeRequestOf } from './route-request.js'
import { formatBlocked, formatExecResult, noRouterError, formatToolError } from './tool-result.js'
import type { RouteExecutor, RouteRequest } from './types.js'

/** What a locally run call produced (the agent's own tools). */
export interface LocalRun {
  /** The model-facing text: the tool's output, or `error: <CODE>: <message>`. */
  readonly output: string
  readonly ok: boolean
  /** Whether the tool's `execute` ran (so the after-chain applies). */
  readonly executed: boolean
}

/** What happened to one call, reported while it runs (the agent turns these into lifecycle events). */
export type ToolCallEvent =
  /** The before-chain decided; nothing ran yet. */
  | { readonly type: 'decided'; readonly verdict: ToolCallVerdict }
  /** A routed call failed (no router, unknown target, sandbox lost…); the text says why. */
  | {
      readonly type: 'error'
      readonly call: ToolCallRequest
      readonly route: RouteToDecision
      readonly message: string
      readonly error: unknown
      readonly code?: string
    }

/** Everything one tool call needs besides the request: the chain, the router, local tools. */
export interface ToolCallDeps {
  /** The tool-call chain (host first, then extensions): before- and after-chain. */
  readonly interceptors: readonly ToolCallInterceptor[]
  /** Runs routeTo verdicts; absent: a routed call is an error result (never a local fallback). */
  readonly router?: RouteExecutor | undefined
  /** Runs an allowed call locally; absent: the caller runs allowed calls itself (HTTP, MCP). */
  readonly runLocal?: (call: ToolCallRequest, signal: AbortSignal | undefined) => Promise<LocalRun>
  /** The timeout (ms) a routed call asks for (the tool's own); the profile default when undefined. */
  readonly routeTimeoutMs?: (call: ToolCallRequest) => number | undefined
  /** Called with the job id once the queue accepted a routed command. */
  readonly onAccepted?: (jobId: string) => void
  /** Live output of a routed command (e.g. MCP progress notifications). */
  readonly onStdout?: (chunk: string) => void
  readonly onStderr?: (chunk: string) => void
  readonly onEvent?: (event: ToolCallEvent) => void | Promise<void>
}

/** How a call was dispatched after the before-chain. */
export type ToolCallVia = 'local' | 'routed' | 'none'

/** The outcome of {@link runToolCall}: what the model sees and what produced it. */
export interface ToolCallRun {
  /** The before-chain's verdict (its `request` is the effective call). */
  readonly verdict: ToolCallVerdict
  /**
   * The model-facing text after the after-chain; `undefined` only for an allowed call without
   * `runLocal` (the caller runs it).
   */
  readonly output: string | undefined
  readonly outcome: 'ok' | 'error' | 'blocked'
  readonly via: ToolCallVia
  /** Whether the after-chain blocked the output. */
  readonly afterBlocked: boolean
  /** The interceptor that blocked or routed (before or after the run). */
  readonly decidedBy?: string
  /** Interceptors that rewrote the call or its output, in order. */
  readonly modifiedBy: readonly string[]
  /** The route the routed call ran with. */
  readonly route?: RouteRequest
  /** A routed command's result, when it ran to completion (whatever its exit code). */
  readonly exec?: ExecResult
  /** Why a routed call did not complete (an AppError: JOB_INTERRUPTED, UNKNOWN_PROFILE, ...). */
  readonly error?: unknown
}

interface Dispatched {
  output: string | undefined
  ok: boolean
  via: ToolCallVia
  executed: boolean
  route?: RouteRequest
  exec?: ExecResult
  error?: unknown
}

/**
 * The one tool-call pipeline of the agent loop, `/v1/tool-calls` and MCP: before-chain → block |
 * local | routed → after-chain → model-facing text (`formatExecResult`, `formatToolError`,
 * `formatBlocked`). Execution failures become text; an interceptor's exception propagates, and so
 * does the abort of `ctx.signal` during a routed or local run.
 */
export async function runToolCall(
  request: ToolCallRequest,
  ctx: InterceptorContext,
  deps: ToolCallDeps,
): Promise<ToolCallRun> {
  const verdict = await evaluateToolCall(deps.interceptors, request, ctx)
  const decided = deps.onEvent?.({ type: 'decided', verdict })
  if (decided) await decided
  const call = verdict.request
  let d: Dispatched
  switch (verdict.kind) {
    case 'block':
      d = { output: formatBlocked(verdict.reason), ok: false, via: 'none', executed: false }
      break
    case 'routeTo':
      d = await runRouted(call, verdict.route, ctx, deps)
      break
    case 'allow':
      if (deps.runLocal) {
        const local = await deps.runLocal(call, ctx.signal)
        d = {
          output: local.output,
          ok: local.ok,
          via: local.executed ? 'local' : 'none',
          executed: local.executed,
        }
      } else {
        d = { output: undefined, ok: true, via: 'none', executed: false }
      }
      break
    default:
      return assertNever(verdict)
  }
  let output = d.output
  let outcome: ToolCallRun['outcome'] = verdict.kind === 'block' ? 'blocked' : d.ok ? 'ok' : 'error'
  let decidedBy = verdict.kind === 'allow' ? undefined : verdict.decidedBy
  let modifiedBy = verdict.modifiedBy
  let afterBlocked = false
  if (d.executed && output !== undefined && deps.interceptors.some(hasAfterToolCall)) {
    const after = await evaluateToolResult(deps.interceptors, call, output, ctx)
    if (after.blocked) {
      output = formatBlocked(after.output)
      outcome = 'blocked'
      decidedBy = after.decidedBy
      afterBlocked = true
    } else {
      output = after.output
    }
    if (after.modifiedBy.length > 0) modifiedBy = [...modifiedBy, ...after.modifiedBy]
  }
  // Built by assignment: conditional spreads are slow on the agent's hot path.
  const run: { -readonly [K in keyof ToolCallRun]: ToolCallRun[K] } = {
    verdict,
    output,
    outcome,
    via: d.via,
    afterBlocked,
    modifiedBy,
  }
  if (decidedBy !== undefined) run.decidedBy = decidedBy
  if (d.route) run.route = d.route
  if (d.exec) run.exec = d.exec
  if (d.error !== undefined) run.error = d.error
  return run
}

const hasAfterToolCall = (ic: ToolCallInterceptor): boolean => typeof ic.afterToolCall === 'function'

/** Sends a routeTo verdict to the router; never falls back to local execution. */
async function runRouted(
  call: ToolCallRequest,
  decision: RouteToDecision,
  ctx: InterceptorContext,
  deps: ToolCallDeps,
): Promise<Dispatched> {
  const { router } = deps
  if (!router) {
    const error = noRouterError(call.name, decision)
    await deps.onEvent?.({
      type: 'error',
      call,
      route: decision,
      message: error.message,
      error,
      code: error.code,
    })
    return { output: formatToolError(error), ok: false, via: 'none', executed: false, error }
  }
  const timeoutMs = deps.routeTimeoutMs?.(call)
  const route = routeRequestOf(decision, call, {
    ...(ctx.tenant === undefined ? {} : { tenant: ctx.tenant }),
    ...(ctx.sessionId === undefined ? {} : { sessionId: ctx.sessionId }),
    ...(timeoutMs === undefined ? {} : { timeoutMs }),
  })
  try {
    const exec = await router.execute(route, {
      ...(ctx.signal ? { signal: ctx.signal } : {}),
      ...(deps.onAccepted ? { onAccepted: deps.onAccepted } : {}),
      ...(deps.onStdout ? { onStdout: deps.onStdout } : {}),
      ...(deps.onStderr ? { onStderr: deps.onStderr } : {}),
    })
    const output = formatExecResult(exec, exec.timedOut ? effectiveTimeout(router, route) : {})
    return { output, ok: true, via: 'routed', executed: true, route, exec }
  } catch (error) {
    if (ctx.signal?.aborted) throw ctx.signal.reason
    const code = (error as { code?: unknown } | null)?.code
    await deps.onEvent?.({
      type: 'error',
      call,
      route: decision,
      message: `routed call "${call.name}" failed: ${error instanceof Error ? error.message : String(error)}`,
      error,
      ...(typeof code === 'string' ? { code } : {}),
    })
    return { output: formatToolError(error), ok: false, via: 'routed', executed: true, route, error }
  }
}

/** The timeout a timed-out route ran with, for its `[timed out after N ms; …]` line. */
function effectiveTimeout(router: RouteExecutor, route: RouteRequest): { timeoutMs?: number } {
  try {
    const ms = router.effectiveTimeoutMs?.(route) ?? route.timeoutMs
    return ms === undefined ? {} : { timeoutMs: ms }
  } catch {
    return route.timeoutMs === undefined ? {} : { timeoutMs: route.timeoutMs }
  }
}
