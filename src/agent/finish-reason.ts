import { assertNever } from '../errors.js'

/**
 * Why a run ended. A discriminated union on `kind`:
 *
 * | kind             | owner        | meaning                                                        |
 * |------------------|--------------|----------------------------------------------------------------|
 * | `natural_stop`   | loop         | the model answered without tool calls                          |
 * | `max_iterations` | loop         | the last allowed iteration ran as a forced, tool-free final    |
 * | `token_limit`    | loop         | the model hit its output-token limit (`length`)                |
 * | `error`          | loop         | the model call failed; `message` says why                      |
 * | `prompt_blocked` | loop         | a prompt interceptor blocked the input; no model call was made |
 * | `budget_exceeded`| interceptor  | forced stop ({@link ForcedStop}) e.g. by `BudgetInterceptor`   |
 * | `custom`         | interceptor  | forced stop with the interceptor's own `reason`                |
 *
 * Interceptors can only produce {@link ForcedStop}s; a loop-owned kind returned by an interceptor
 * fails the run.
 */
export type FinishReason =
  | { readonly kind: 'natural_stop' }
  | { readonly kind: 'max_iterations' }
  | { readonly kind: 'token_limit' }
  /** `code` is the model client's `AppError` code (e.g. `RATE_LIMITED`) when it threw one, else `UNAVAILABLE`. */
  | { readonly kind: 'error'; readonly message: string; readonly code: string }
  | { readonly kind: 'prompt_blocked'; readonly reason: string; readonly blockedBy: string }
  | ForcedStop

/** A finish reason an interceptor may cause through `decide` → `finishNow`. */
export type ForcedStop =
  { readonly kind: 'budget_exceeded' } | { readonly kind: 'custom'; readonly reason: string }

/** Factories for {@link ForcedStop}. */
export const ForcedStop = {
  /** A resource budget is exhausted. */
  budgetExceeded: (): ForcedStop => BUDGET,
  /** Your own steering reason, e.g. `ForcedStop.custom('answer found')`. */
  custom: (reason: string): ForcedStop => {
    if (typeof reason !== 'string' || reason.length === 0) {
      throw new TypeError(`ForcedStop.custom needs a non-empty reason, got ${JSON.stringify(reason)}`)
    }
    return { kind: 'custom', reason }
  },
} as const

const BUDGET: ForcedStop = Object.freeze({ kind: 'budget_exceeded' as const })

/** Whether `reason` is an interceptor-owned forced stop. */
export function isForcedStop(reason: unknown): reason is ForcedStop {
  if (!reason || typeof reason !== 'object') return false
  const r = reason as { kind?: unknown; reason?: unknown }
  return (
    r.kind === 'budget_exceeded' ||
    (r.kind === 'custom' && typeof r.reason === 'string' && r.reason.length > 0)
  )
}

/** A short label for logs and span attributes: `natural_stop`, `custom:<reason>`, `error:<message>`… */
export function finishReasonLabel(reason: FinishReason): string {
  switch (reason.kind) {
    case 'natural_stop':
    case 'max_iterations':
    case 'token_limit':
    case 'budget_exceeded':
      return reason.kind
    case 'error':
      return `error:${reason.message}`
    case 'prompt_blocked':
      return `prompt_blocked:${reason.reason}`
    case 'custom':
      return `custom:${reason.reason}`
    default:
      return assertNever(reason)
  }
}

/** What `decide` returns: keep going, or force a graceful tool-free final answer. */
export type LoopDecision =
  | { readonly kind: 'continue' }
  | { readonly kind: 'finish_now'; readonly cause: ForcedStop; readonly instruction: string }

const CONTINUE: LoopDecision = Object.freeze({ kind: 'continue' as const })

/** Factories for {@link LoopDecision}. */
export const LoopDecision = {
  continue: (): LoopDecision => CONTINUE,
  /**
   * End the run gracefully: the next iteration injects `instruction` as a user message, withholds
   * tools, marks `isLastIteration` and ignores tool calls in the reply.
   */
  finishNow: (cause: ForcedStop, instruction: string): LoopDecision => {
    if (!isForcedStop(cause)) {
      throw new TypeError(
        `finishNow needs a ForcedStop cause (budget_exceeded or custom), got ${JSON.stringify(cause)}`,
      )
    }
    if (typeof instruction !== 'string' || instruction.length === 0) {
      throw new TypeError('finishNow needs a non-empty instruction for the final answer')
    }
    return { kind: 'finish_now', cause, instruction }
  },
} as const

/** Shorthand for {@link LoopDecision.finishNow}. */
export const finishNow = LoopDecision.finishNow
