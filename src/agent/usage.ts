import type { Usage } from './model-client.js'

/** Usage of one model call, with the model id the provider reported (or the requested one when it reported none). */
export interface LlmCallUsage {
  /** Provider-reported model id; the requested model id when the provider did not report one. */
  readonly model: string
  /** The model id the loop asked for (after the model-request chain). */
  readonly requestedModel: string
  /** 1-based iteration the call belonged to. */
  readonly iteration: number
  readonly usage: Readonly<Usage>
}

/** A usage with every counter at zero. */
export function emptyUsage(): Usage {
  return {
    inputTokens: 0,
    outputTokens: 0,
    totalTokens: 0,
    cachedInputTokens: 0,
    cacheWriteInputTokens: 0,
    reasoningTokens: 0,
  }
}

/**
 * Completes a provider-reported partial usage: missing counters are 0, and `totalTokens` defaults to
 * input + output (cached and cache-write are subsets of input, reasoning a subset of output).
 */
export function normalizeUsage(partial: Partial<Usage> | undefined): Usage {
  const inputTokens = count(partial?.inputTokens)
  const outputTokens = count(partial?.outputTokens)
  return {
    inputTokens,
    outputTokens,
    totalTokens: partial?.totalTokens !== undefined ? count(partial.totalTokens) : inputTokens + outputTokens,
    cachedInputTokens: count(partial?.cachedInputTokens),
    cacheWriteInputTokens: count(partial?.cacheWriteInputTokens),
    reasoningTokens: count(partial?.reasoningTokens),
  }
}

/** Adds `delta` into `into` (mutates and returns `into`). */
export function addUsage(into: Usage, delta: Readonly<Usage>): Usage {
  into.inputTokens += delta.inputTokens
  into.outputTokens += delta.outputTokens
  into.totalTokens += delta.totalTokens
  into.cachedInputTokens += delta.cachedInputTokens
  into.cacheWriteInputTokens += delta.cacheWriteInputTokens
  into.reasoningTokens += delta.reasoningTokens
  return into
}

function count(n: number | undefined): number {
  return typeof n === 'number' && Number.isFinite(n) && n > 0 ? Math.floor(n) : 0
}

/**
 * Sandbox time of a run's routed calls, in seconds per provider (the provider that ran each call:
 * the routing policy's pick where one chose, else the verdict's provider). A call's time is its
 * command's duration in the sandbox.
 */
export function sandboxSecondsOf(
  toolCalls: readonly {
    readonly exec?: { readonly durationMs: number; readonly route?: { readonly providerId: string } }
    readonly route?: { readonly providerId: string }
  }[],
): Record<string, number> {
  const out: Record<string, number> = {}
  for (const t of toolCalls) {
    if (!t.exec) continue
    const provider = t.exec.route?.providerId ?? t.route?.providerId
    if (!provider) continue
    out[provider] = (out[provider] ?? 0) + t.exec.durationMs / 1000
  }
  return out
}
