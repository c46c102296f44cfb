import type {
  ModelRequestDecision,
  PromptDecision,
  ToolCallDecision,
  ToolResultDecision,
} from './decisions.js'

/** A value or a promise of it: every interceptor may be sync or async. */
export type MaybePromise<T> = T | Promise<T>

/** The portable tool-call carrier every tool-call interceptor sees. */
export interface ToolCallRequest {
  /** Host-facing tool id; extension tools are namespaced `plugin__<extensionId>__<tool>`. */
  readonly name: string
  /** Raw JSON arguments, as the model produced them. */
  readonly arguments: string
  readonly callId: string
  /** Call type, e.g. `function`. */
  readonly type: string
  readonly metadata?: Readonly<Record<string, unknown>>
}

/** What every interceptor is given besides its request. */
export interface InterceptorContext {
  /** Tenant the call runs for (service mode). */
  readonly tenant?: string
  readonly sessionId?: string
  readonly signal?: AbortSignal
  /** Free-form attributes for plugin-defined context. */
  readonly attributes?: Readonly<Record<string, unknown>>
}

/** Inspects, rewrites, blocks or routes tool calls; optionally re-evaluates their output. */
export interface ToolCallInterceptor {
  /** Unique per chain across host and extensions. */
  readonly name: string
  beforeToolCall(request: ToolCallRequest, ctx: InterceptorContext): MaybePromise<ToolCallDecision>
  /** Runs on the output of local and routed calls alike. Absent means allow. */
  afterToolCall?(
    request: ToolCallRequest,
    output: string,
    ctx: InterceptorContext,
  ): MaybePromise<ToolResultDecision>
}

/** The prompt carrier: user input before it enters memory or the model. */
export interface PromptRequest {
  readonly input: string
  readonly sessionId?: string
}

/** Rewrites or blocks user input. */
export interface PromptInterceptor {
  readonly name: string
  intercept(request: PromptRequest, ctx: InterceptorContext): MaybePromise<PromptDecision>
}

/** The six read-only scalar fields of a model request (history is not open to interceptors). */
export interface ModelRequestView {
  readonly model: string
  readonly systemPrompt?: string
  readonly instructions?: string
  readonly temperature?: number
  readonly topP?: number
  readonly maxOutputTokens?: number
}

/** Adjusts model parameters per request. Cannot block. */
export interface ModelRequestInterceptor {
  readonly name: string
  intercept(request: ModelRequestView, ctx: InterceptorContext): MaybePromise<ModelRequestDecision>
}

/** The stage an interceptor failed in (named in {@link InterceptorError}). */
export type InterceptorStage =
  | 'beforeToolCall'
  | 'afterToolCall'
  | 'prompt'
  | 'modelRequest'
  | 'aroundIteration'
  | 'aroundLlmCall'
  | 'aroundToolCall'
  | 'decide'
