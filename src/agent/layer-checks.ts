import type { IterationResult, ToolCallRecord } from './agent-interceptor.js'
import { isForcedStop } from './finish-reason.js'
import type { ModelResponse } from './model-client.js'
import type { LayerCheck } from './onion.js'

/*
 * What an around-layer may return. A layer that short-circuits builds the stage's result itself;
 * these checks turn a malformed one into an InterceptorError naming the layer.
 */

/** An iteration result; a finish may carry a loop-owned reason only if next() finished with it. */
export const checkIteration: LayerCheck<IterationResult> = (out, inner) => {
  if (!out || (out.kind !== 'continue' && out.kind !== 'finish')) {
    return `returned an invalid IterationResult ${JSON.stringify(out)}; return what next() resolved to`
  }
  if (out.kind === 'continue') return undefined
  if (typeof out.output !== 'string') return 'returned a finish IterationResult without a string output'
  if (isForcedStop(out.finishReason)) return undefined
  if (inner?.kind === 'finish' && inner.finishReason.kind === out.finishReason?.kind) return undefined
  return `reported the loop-owned finish reason ${JSON.stringify(out.finishReason)}; interceptors may only force { kind: 'budget_exceeded' } or { kind: 'custom', reason }`
}

/** A model response must be an object. */
export const checkResponse: LayerCheck<ModelResponse> = (out) =>
  out && typeof out === 'object' ? undefined : `returned an invalid ModelResponse ${JSON.stringify(out)}`

/** A tool-call record must carry a string output (what the model sees). */
export const checkRecord: LayerCheck<ToolCallRecord> = (out) =>
  out && typeof out === 'object' && typeof out.output === 'string'
    ? undefined
    : `returned an invalid ToolCallRecord ${JSON.stringify(out)}; return the record from next() or one with a string output`
