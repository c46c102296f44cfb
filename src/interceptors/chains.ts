import { assertNever } from '../errors.js'
import type { RouteToDecision } from './decisions.js'
import { ModelRequestDecision } from './decisions.js'
import { InterceptorError } from './errors.js'
import type {
  InterceptorContext,
  InterceptorStage,
  MaybePromise,
  ModelRequestInterceptor,
  ModelRequestView,
  PromptInterceptor,
  PromptRequest,
  ToolCallInterceptor,
  ToolCallRequest,
} from './types.js'

/*
 * One chaining rule for all three surfaces: interceptors run in the order given (host first, then
 * extensions in registration order — see composeInterceptors), each sees the current effective value,
 * MODIFY feeds downstream, BLOCK and ROUTE_TO stop the chain. A sync interceptor costs no microtask:
 * only thenables are awaited.
 */

/** Outcome of the before-tool-call chain. */
export type ToolCallVerdict =
  /** Execute `request` (possibly rewritten) locally. */
  | { readonly kind: 'allow'; readonly request: ToolCallRequest; readonly modifiedBy: readonly string[] }
  | {
      readonly kind: 'block'
      readonly request: ToolCallRequest
      readonly reason: string
      readonly decidedBy: string
      readonly modifiedBy: readonly string[]
    }
  | {
      readonly kind: 'routeTo'
      readonly request: ToolCallRequest
      readonly route: RouteToDecision
      readonly decidedBy: string
      readonly modifiedBy: readonly string[]
    }

/** Outcome of the after-tool-call chain. */
export interface ToolResultVerdict {
  /** What the model sees: the (possibly rewritten) output, or the block reason. */
  readonly output: string
  readonly blocked: boolean
  /** Name of the interceptor that blocked, when blocked. */
  readonly decidedBy?: string
  readonly modifiedBy: readonly string[]
}

/** Outcome of the prompt chain. */
export type PromptVerdict =
  | { readonly kind: 'allow'; readonly input: string; readonly modifiedBy: readonly string[] }
  | { readonly kind: 'block'; readonly reason: string; readonly decidedBy: string }

/** Outcome of the model-request chain. */
export interface ModelRequestVerdict {
  /** The effective request after every override. */
  readonly request: ModelRequestView
  /** All overrides stacked in chain order. */
  readonly decision: ModelRequestDecision
}

function isThenable<T>(v: MaybePromise<T>): v is Promise<T> {
  return typeof (v as { then?: unknown } | null)?.then === 'function'
}

/**
 * Calls one interceptor, wrapping a throw or rejection in an InterceptorError. Returns the value
 * itself when the interceptor answered synchronously (no promise, no microtask).
 */
function call<T>(name: string, stage: InterceptorStage, fn: () => MaybePromise<T>): MaybePromise<T> {
  let r: MaybePromise<T>
  try {
    r = fn()
  } catch (err) {
    throw new InterceptorError(name, stage, err)
  }
  if (!isThenable(r)) return r
  return r.then(undefined, (err: unknown) => {
    throw new InterceptorError(name, stage, err)
  })
}

function invalid(name: string, stage: InterceptorStage, got: unknown): InterceptorError {
  return new InterceptorError(name, stage, undefined, `returned an invalid decision: ${safeJson(got)}`)
}

function safeJson(v: unknown): string {
  try {
    return JSON.stringify(v) ?? String(v)
  } catch {
    return String(v)
  }
}

/** Runs `beforeToolCall` of each interceptor in order. */
export async function evaluateToolCall(
  interceptors: readonly ToolCallInterceptor[],
  request: ToolCallRequest,
  ctx: InterceptorContext = {},
): Promise<ToolCallVerdict> {
  let current = request
  let modifiedBy: string[] | undefined
  for (const ic of interceptors) {
    ctx.signal?.throwIfAborted()
    const req = current
    const r = call(ic.name, 'beforeToolCall', () => ic.beforeToolCall(req, ctx))
    const d = isThenable(r) ? await r : r
    switch (d?.kind) {
      case 'allow':
        break
      case 'modify':
        current = { ...current, name: d.name ?? current.name, arguments: d.arguments }
        ;(modifiedBy ??= []).push(ic.name)
        break
      case 'block':
        return {
          kind: 'block',
          request: current,
          reason: d.reason,
          decidedBy: ic.name,
          modifiedBy: modifiedBy ?? [],
        }
      case 'routeTo':
        return {
          kind: 'routeTo',
          request: current,
          route: d,
          decidedBy: ic.name,
          modifiedBy: modifiedBy ?? [],
        }
      case undefined:
        throw invalid(ic.name, 'beforeToolCall', d)
      default:
        return assertNever(d)
    }
  }
  return { kind: 'allow', request: current, modifiedBy: modifiedBy ?? [] }
}

/**
 * Runs `afterToolCall` of each interceptor in order on a tool's output — local or routed alike.
 * The router calls this on routed results before the model sees them.
 */
export async function evaluateToolResult(
  interceptors: readonly ToolCallInterceptor[],
  request: ToolCallRequest,
  output: string,
  ctx: InterceptorContext = {},
): Promise<ToolResultVerdict> {
  let current = output
  let modifiedBy: string[] | undefined
  for (const ic of interceptors) {
    const after = ic.afterToolCall
    if (!after) continue
    const out = current
    const r = call(ic.name, 'afterToolCall', () => after.call(ic, request, out, ctx))
    const d = isThenable(r) ? await r : r
    switch (d?.kind) {
      case 'allow':
        break
      case 'modify':
        if (typeof d.output !== 'string') throw invalid(ic.name, 'afterToolCall', d)
        current = d.output
        ;(modifiedBy ??= []).push(ic.name)
        break
      case 'block':
        return { output: d.reason, blocked: true, decidedBy: ic.name, modifiedBy: modifiedBy ?? [] }
      case undefined:
        throw invalid(ic.name, 'afterToolCall', d)
      default:
        return assertNever(d)
    }
  }
  return { output: current, blocked: false, modifiedBy: modifiedBy ?? [] }
}

/** Runs each prompt interceptor in order on user input. */
export async function evaluatePrompt(
  interceptors: readonly PromptInterceptor[],
  request: PromptRequest,
  ctx: InterceptorContext = {},
): Promise<PromptVerdict> {
  let input = request.input
  let modifiedBy: string[] | undefined
  for (const ic of interceptors) {
    const req: PromptRequest = { ...request, input }
    const r = call(ic.name, 'prompt', () => ic.intercept(req, ctx))
    const d = isThenable(r) ? await r : r
    switch (d?.kind) {
      case 'allow':
        break
      case 'modify':
        if (typeof d.input !== 'string') throw invalid(ic.name, 'prompt', d)
        input = d.input
        ;(modifiedBy ??= []).push(ic.name)
        break
      case 'block':
        return { kind: 'block', reason: d.reason, decidedBy: ic.name }
      case undefined:
        throw invalid(ic.name, 'prompt', d)
      default:
        return assertNever(d)
    }
  }
  return { kind: 'allow', input, modifiedBy: modifiedBy ?? [] }
}

/** Runs each model-request interceptor in order; each sees the previous one's output. */
export async function evaluateModelRequest(
  interceptors: readonly ModelRequestInterceptor[],
  request: ModelRequestView,
  ctx: InterceptorContext = {},
): Promise<ModelRequestVerdict> {
  let current = request
  let merged = ModelRequestDecision.allow()
  for (const ic of interceptors) {
    const view = current
    const r = call(ic.name, 'modelRequest', () => ic.intercept(view, ctx))
    const d = isThenable(r) ? await r : r
    if (!(d instanceof ModelRequestDecision)) throw invalid(ic.name, 'modelRequest', d)
    if (d.isAllow) continue
    current = { ...current, ...d.overrides }
    merged = merged.merge(d)
  }
  return { request: current, decision: merged }
}
