import type { MaybePromise } from '../interceptors/types.js'
import { ModelCallError } from './errors.js'
import type { ModelClient, ModelRequest, ModelResponse, ModelToolCall } from './model-client.js'

/**
 * One scripted reply: a text answer, a full response, an `Error` to throw, or a function computing
 * the reply from the request (its 0-based call index as second argument).
 */
export type ScriptedStep =
  | string
  | ModelResponse
  | Error
  | ((request: ModelRequest, call: number) => MaybePromise<ModelResponse | string>)

/** Options of {@link scriptedModel}. */
export interface ScriptedModelOptions {
  /** Model id the client reports as its default. @default 'scripted' */
  model?: string
  /** Start over at the first step when the script is exhausted (benchmarks, demos). @default false */
  loop?: boolean
  /** Keep every request in `requests` (turn off for long benchmark runs). @default true */
  record?: boolean
}

/** A {@link ModelClient} replaying scripted replies, with the requests it received. */
export interface ScriptedModel extends ModelClient {
  /** Every request received, in order (shallow copies). */
  readonly requests: readonly ModelRequest[]
  /** Number of calls made so far. */
  readonly calls: number
}

/**
 * A model client that replays `steps` in order — for tests and demos. Running out of steps throws a
 * {@link ModelCallError} (the run ends with finishReason `error`) unless `loop` is set. An aborted
 * signal rejects with its reason.
 */
export function scriptedModel(
  steps: readonly ScriptedStep[],
  options: ScriptedModelOptions = {},
): ScriptedModel {
  const requests: ModelRequest[] = []
  const record = options.record ?? true
  let calls = 0
  return {
    model: options.model ?? 'scripted',
    get requests() {
      return requests
    },
    get calls() {
      return calls
    },
    async generate(request: ModelRequest, signal: AbortSignal): Promise<ModelResponse> {
      signal.throwIfAborted()
      const index = calls++
      if (record) requests.push({ ...request, messages: [...request.messages], tools: [...request.tools] })
      const step = steps.length > 0 && options.loop ? steps[index % steps.length] : steps[index]
      if (step === undefined) {
        throw new ModelCallError(
          `scriptedModel ran out of replies at call ${index + 1} (script has ${steps.length}); add more steps or pass { loop: true }`,
        )
      }
      if (step instanceof Error) throw step
      if (typeof step === 'string') return { text: step, finishReason: 'stop' }
      if (typeof step === 'function') {
        const r = await step(request, index)
        return typeof r === 'string' ? { text: r, finishReason: 'stop' } : r
      }
      return step
    },
  }
}

/** Builds a scripted tool call; `args` objects are JSON-encoded. Ids default to `call_<name>_<n>`. */
export function scriptedToolCall(name: string, args: unknown = {}, id?: string): ModelToolCall {
  return {
    id: id ?? `call_${name}_${++toolCallSeq}`,
    name,
    arguments: typeof args === 'string' ? args : JSON.stringify(args),
  }
}

let toolCallSeq = 0
