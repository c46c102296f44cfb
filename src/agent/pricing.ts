import type { Usage } from './model-client.js'
import type { LlmCallUsage } from './usage.js'

/**
 * Prices of one model in currency units (e.g. USD) per million tokens. Cache-read and cache-write
 * rates default to the plain input rate.
 */
export interface ModelPrice {
  readonly inputPerMTok: number
  readonly outputPerMTok: number
  /** Rate for cached input reads. @default inputPerMTok */
  readonly cachedInputPerMTok?: number
  /** Rate for cache writes (some providers bill a premium). @default inputPerMTok */
  readonly cacheWriteInputPerMTok?: number
}

/** Prices keyed by the provider-reported model id. The project ships no prices: supply your own. */
export type PriceTable = Readonly<Record<string, ModelPrice>>

/**
 * Cost of one call's usage at `price`: plain input (input − cached − cache-write, at least 0) at the
 * input rate, cached reads and cache writes at their rates, output (reasoning included) at the output rate.
 */
export function costOfUsage(usage: Readonly<Usage>, price: ModelPrice): number {
  const plainInput = Math.max(usage.inputTokens - usage.cachedInputTokens - usage.cacheWriteInputTokens, 0)
  const cachedRate = price.cachedInputPerMTok ?? price.inputPerMTok
  const writeRate = price.cacheWriteInputPerMTok ?? price.inputPerMTok
  return (
    (plainInput * price.inputPerMTok +
      usage.cachedInputTokens * cachedRate +
      usage.cacheWriteInputTokens * writeRate +
      usage.outputTokens * price.outputPerMTok) /
    1_000_000
  )
}

/** Cost of a run's calls. A model missing from the table costs 0 and is listed in `unpricedModels`. */
export function costOfCalls(
  calls: readonly LlmCallUsage[],
  table: PriceTable,
): { cost: number; unpricedModels: string[] } {
  let cost = 0
  const unpriced = new Set<string>()
  for (const call of calls) {
    const price = priceOf(table, call.model)
    if (price) cost += costOfUsage(call.usage, price)
    else unpriced.add(call.model)
  }
  return { cost, unpricedModels: [...unpriced] }
}

/** The table's price for `model`, ignoring inherited object keys. */
export function priceOf(table: PriceTable, model: string): ModelPrice | undefined {
  return Object.prototype.hasOwnProperty.call(table, model) ? table[model] : undefined
}
