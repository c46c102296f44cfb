import { AppError } from '../errors.js'
import { InterceptorError } from '../interceptors/errors.js'
import type { MaybePromise } from '../interceptors/types.js'
import type { AgentInterceptor, AgentRunState, Next } from './agent-interceptor.js'
import type { ForcedStop } from './finish-reason.js'
import { isForcedStop } from './finish-reason.js'

/** The three onion stages. */
export type AroundStage = 'aroundIteration' | 'aroundLlmCall' | 'aroundToolCall'

/** One interceptor's wrapper for one stage. */
export interface Layer<In, Ctx, Out> {
  readonly name: string
  readonly call: (ctx: Ctx, next: Next<In, Out>) => MaybePromise<Out>
}

/**
 * Checks a layer's result; returns a problem description to fail the run with, or undefined.
 * `inner` is what `next` resolved to (undefined when the layer short-circuited).
 */
export type LayerCheck<Out> = (out: Out, inner: Out | undefined) => string | undefined

function isThenable<T>(v: MaybePromise<T>): v is Promise<T> {
  return typeof (v as { then?: unknown } | null)?.then === 'function'
}

/**
 * Runs `core` wrapped by `layers` (index 0 outermost). Each layer gets a fresh context built from the
 * current input and a `next` callable at most once. A throw from the layer's own code becomes an
 * {@link InterceptorError}; a failure coming out of `next` is re-thrown unchanged.
 */
export function runOnion<In, Ctx, Out>(
  stage: AroundStage,
  layers: readonly Layer<In, Ctx, Out>[],
  input: In,
  makeCtx: (input: In) => Ctx,
  core: (input: In) => Promise<Out>,
  check?: LayerCheck<Out>,
): Promise<Out> {
  if (layers.length === 0) return core(input)
  // What each depth resolved or rejected with: a layer's failure is "from next" when it is the very
  // value depth i + 1 rejected with (no extra promise per layer to observe it).
  const results: (Out | undefined)[] = []
  const failures: ({ error: unknown } | undefined)[] = []
  const dispatch = async (i: number, current: In): Promise<Out> => {
    const layer = layers[i]
    if (!layer) {
      try {
        return (results[i] = await core(current))
      } catch (error) {
        failures[i] = { error }
        throw error
      }
    }
    let called = false
    const next: Next<In, Out> = (modified) => {
      if (called) {
        throw new AppError(
          'INTERCEPTOR_FAILED',
          `next() was called a second time in ${stage} of "${layer.name}"; call next at most once per stage`,
        )
      }
      called = true
      return dispatch(i + 1, modified === undefined ? current : modified)
    }
    let out: Out
    try {
      const r = layer.call(makeCtx(current), next)
      out = isThenable(r) ? await r : r
    } catch (err) {
      const inner = failures[i + 1]
      const error =
        called && inner && inner.error === err ? err : new InterceptorError(layer.name, stage, err)
      failures[i] = { error }
      throw error
    }
    const problem = check?.(out, called ? results[i + 1] : undefined)
    if (problem !== undefined) {
      const error = new InterceptorError(layer.name, stage, undefined, problem)
      failures[i] = { error }
      throw error
    }
    return (results[i] = out)
  }
  return dispatch(0, input)
}

/** The first `finishNow` of a decide round, with the interceptor that returned it. */
export interface ForcedFinish {
  readonly cause: ForcedStop
  readonly instruction: string
  readonly decidedBy: string
}

/**
 * Consults `decide` of each interceptor in order; the first `finishNow` wins (later ones are not
 * asked). A throw, or a finishNow with a loop-owned cause, fails the run naming the interceptor.
 */
export async function decideAll(
  interceptors: readonly { readonly ic: AgentInterceptor; readonly name: string }[],
  state: AgentRunState,
): Promise<ForcedFinish | undefined> {
  for (const { ic, name } of interceptors) {
    const decide = ic.decide
    if (!decide) continue
    let d
    try {
      const r = decide.call(ic, state)
      d = isThenable(r) ? await r : r
    } catch (err) {
      throw new InterceptorError(name, 'decide', err)
    }
    if (d === undefined || d.kind === 'continue') continue
    if (
      d.kind !== 'finish_now' ||
      !isForcedStop(d.cause) ||
      typeof d.instruction !== 'string' ||
      !d.instruction
    ) {
      throw new InterceptorError(
        name,
        'decide',
        undefined,
        `returned an invalid decision ${JSON.stringify(d)}; return LoopDecision.finishNow(ForcedStop.budgetExceeded() | ForcedStop.custom(reason), instruction) — loop-owned reasons cannot be forced`,
      )
    }
    return { cause: d.cause, instruction: d.instruction, decidedBy: name }
  }
  return undefined
}
