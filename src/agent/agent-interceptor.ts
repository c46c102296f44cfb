import type { RouteToDecision } from '../interceptors/decisions.js'
import type { MaybePromise, ToolCallRequest } from '../interceptors/types.js'
import type { ExecResult } from '../sandbox/types.js'
import type { FinishReason, ForcedStop, LoopDecision } from './finish-reason.js'
import type { ModelRequest, ModelResponse, Usage } from './model-client.js'
import type { LlmCallUsage } from './usage.js'

/** Identity of one `agent.run`, shared by every context of that run (usable as a WeakMap key). */
export interface AgentRun {
  readonly runId: string
  readonly sessionId?: string
  readonly tenant?: string
  /**
   * Publishes a warning: an ERROR lifecycle event with `attributes.severity = 'warning'` and an entry
   * in `AgentResult.warnings`. Observational only; it never changes the run.
   */
  warn(source: string, message: string, attributes?: Readonly<Record<string, unknown>>): Promise<void>
}

/** How one tool call ended: `ok` (local or routed output), `error` (error result), `blocked` (by an interceptor). */
export type ToolCallOutcome = 'ok' | 'error' | 'blocked'

/** What happened to one tool call; `output` is exactly what the model sees. */
export interface ToolCallRecord {
  readonly callId: string
  /** The tool name the model asked for. */
  readonly requestedName: string
  /** The effective name after the before-chain (a modify may rename). */
  readonly name: string
  /** The effective raw JSON arguments after the before-chain. */
  readonly arguments: string
  readonly output: string
  readonly outcome: ToolCallOutcome
  /** `local` (the tool's execute ran), `routed` (the RouteExecutor ran it) or `none` (nothing ran). */
  readonly via: 'local' | 'routed' | 'none'
  /** The routeTo verdict, for routed calls (also when routing failed). */
  readonly route?: RouteToDecision
  /** The sandbox result, for routed calls that ran. */
  readonly exec?: ExecResult
  /** The interceptor that blocked or routed the call. */
  readonly decidedBy?: string
  /** Interceptors that rewrote the call (before-chain) or its output (after-chain), in order. */
  readonly modifiedBy: readonly string[]
  /** 1-based iteration of the call. */
  readonly iteration: number
  readonly durationMs: number
}

/** Accumulated state of a run, as `decide` sees it before each iteration. Valid during the call. */
export interface AgentRunState {
  readonly run: AgentRun
  readonly iterationsCompleted: number
  readonly maxIterations: number
  /** Accumulated over every model call of the run so far. */
  readonly usage: Readonly<Usage>
  readonly llmCalls: readonly LlmCallUsage[]
  readonly toolCalls: readonly ToolCallRecord[]
}

/** Context of one iteration. Only `instruction` is read back from a context passed to `next`. */
export interface IterationContext {
  readonly run: AgentRun
  /** 1-based. */
  readonly iteration: number
  readonly maxIterations: number
  /** True on a forced-final iteration (last by count, or a `finishNow`): tools are withheld. */
  readonly isLastIteration: boolean
  /** The `finishNow` cause that made this iteration final, if any. */
  readonly forcedStop?: ForcedStop
  /** An extra user message sent with this iteration's model call only (the final-answer instruction). */
  readonly instruction?: string
  readonly state: AgentRunState
}

/** How an iteration ended: go on, or finish the run. */
export type IterationResult =
  | { readonly kind: 'continue' }
  | { readonly kind: 'finish'; readonly output: string; readonly finishReason: FinishReason }

/** Context of one model call; `request` is what goes to the model (after the model-request chain). */
export interface LlmCallContext {
  readonly run: AgentRun
  readonly iteration: number
  readonly isLastIteration: boolean
  readonly request: ModelRequest
  readonly state: AgentRunState
}

/** Context of one tool call; `call` is the call as the model produced it (or as an outer layer rewrote it). */
export interface ToolCallContext {
  readonly run: AgentRun
  readonly iteration: number
  readonly call: ToolCallRequest
  readonly state: AgentRunState
}

/**
 * Continues to the next layer (and finally the stage itself). Call it at most once — a second call
 * throws; not calling it short-circuits the stage. Pass a modified value to change what inner layers
 * and the stage receive.
 */
export type Next<In, Out> = (modified?: In) => Promise<Out>

/**
 * Middleware for the agent loop, onion-style: the first interceptor added is outermost for every
 * `around*` stage; `decide` is consulted in order before every iteration and the first `finishNow`
 * wins. Every member but `name` is optional. An exception thrown by an interceptor fails the run with
 * an `InterceptorError` naming it and the stage; errors coming out of `next` pass through unchanged.
 */
export interface AgentInterceptor {
  /** Unique among the agent's interceptors, named in errors; without one, errors say `agent interceptor #<position>` (1-based). */
  readonly name?: string
  /** Wraps a whole iteration (model call and its tool calls). */
  aroundIteration?(
    ctx: IterationContext,
    next: Next<IterationContext, IterationResult>,
  ): MaybePromise<IterationResult>
  /** Wraps one model call; `next(request)` may send a changed request; returning a response skips the model. */
  aroundLlmCall?(ctx: LlmCallContext, next: Next<ModelRequest, ModelResponse>): MaybePromise<ModelResponse>
  /**
   * Wraps one tool call including the before-chain, execution (local or routed) and the after-chain;
   * `next(call)` may pass a changed call; the returned record's `output` is what the model sees.
   */
  aroundToolCall?(
    ctx: ToolCallContext,
    next: Next<ToolCallRequest, ToolCallRecord>,
  ): MaybePromise<ToolCallRecord>
  /** Pure judgement of the run so far; `undefined` means continue. */
  decide?(state: AgentRunState): MaybePromise<LoopDecision | undefined>
}
