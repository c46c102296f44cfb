import { z } from 'zod'
import type { AgentInterceptor, AgentRun, AgentRunState, LlmCallContext, Next } from './agent-interceptor.js'
import { AgentConfigError } from './errors.js'
import { ForcedStop, LoopDecision } from './finish-reason.js'
import type { ModelRequest, ModelResponse } from './model-client.js'
import type { PriceTable } from './pricing.js'
import { costOfCalls, priceOf } from './pricing.js'
import type { LlmCallUsage } from './usage.js'
import { sandboxSecondsOf } from './usage.js'

const rate = z.number().finite().nonnegative()
const ModelPriceSchema = z
  .object({
    inputPerMTok: rate,
    outputPerMTok: rate,
    cachedInputPerMTok: rate.optional(),
    cacheWriteInputPerMTok: rate.optional(),
  })
  .strict()

const BudgetOptionsSchema = z
  .object({
    /** Stop once the run's total tokens reach this. */
    maxTotalTokens: z.number().int().positive().optional(),
    /** Stop once the run's cost (from `priceTable`) reaches this, in the table's currency. */
    maxCost: z.number().finite().positive().optional(),
    priceTable: z.record(z.string(), ModelPriceSchema).optional(),
    /** Price of one sandbox-second per provider id (the provider that ran each routed call); part of `maxCost`. */
    sandboxPricePerSecond: z.record(z.string(), rate).optional(),
    instruction: z.string().min(1).optional(),
    name: z.string().min(1).optional(),
  })
  .strict()

/** Options of {@link BudgetInterceptor}. */
export type BudgetInterceptorOptions = z.input<typeof BudgetOptionsSchema>

/** Default final-answer instruction when a budget is exhausted. */
export const DEFAULT_BUDGET_INSTRUCTION =
  'The resource budget for this task is exhausted. Do not call tools. Provide your final answer now, based on what you have so far.'

/**
 * Ends a run gracefully when its token or cost budget is reached: `decide` returns
 * `finishNow(budget_exceeded, instruction)`, so the next iteration is a tool-free final answer.
 *
 * - Soft by one model call: a breach is seen at the next iteration boundary, and the forced final
 *   call is one more (counted) call. Size limits with that headroom.
 * - Cost uses the provider-reported model id; a model missing from the table costs 0 and is
 *   reported once per run as a warning (ERROR event with `severity: 'warning'`, and in
 *   `AgentResult.warnings`). Prefer `maxTotalTokens` when not every model is priced.
 * - `maxCost` covers model tokens (`priceTable`) and sandbox time (`sandboxPricePerSecond`, per
 *   provider that ran each routed call, from the command's duration), soft by one call as for tokens.
 * - Fails fast at construction with no limit, or `maxCost` without a `priceTable` or `sandboxPricePerSecond`.
 */
export class BudgetInterceptor implements AgentInterceptor {
  readonly name: string
  readonly maxTotalTokens: number | undefined
  readonly maxCost: number | undefined
  readonly priceTable: PriceTable | undefined
  readonly sandboxPricePerSecond: Readonly<Record<string, number>> | undefined
  private readonly instruction: string
  private readonly warned = new WeakMap<AgentRun, Set<string>>()
  /** Present only with a price table: reports unpriced models as they are seen. */
  readonly aroundLlmCall?: (
    ctx: LlmCallContext,
    next: Next<ModelRequest, ModelResponse>,
  ) => Promise<ModelResponse>

  constructor(options: BudgetInterceptorOptions) {
    const parsed = BudgetOptionsSchema.safeParse(options ?? {})
    if (!parsed.success) {
      const issue = parsed.error.issues[0]
      throw new AgentConfigError(
        `invalid BudgetInterceptor options${issue ? ` at "${issue.path.join('.')}": ${issue.message}` : ''}`,
        parsed.error,
      )
    }
    const o = parsed.data
    if (o.maxTotalTokens === undefined && o.maxCost === undefined) {
      throw new AgentConfigError(
        'BudgetInterceptor needs at least one limit: maxTotalTokens (needs no prices) or maxCost (with a priceTable)',
      )
    }
    if (o.maxCost !== undefined && o.priceTable === undefined && o.sandboxPricePerSecond === undefined) {
      throw new AgentConfigError(
        "BudgetInterceptor maxCost needs a priceTable (prices per million tokens keyed by the provider-reported model id, e.g. { 'gpt-4o-mini': { inputPerMTok: 0.15, outputPerMTok: 0.6 } }) and/or sandboxPricePerSecond (per provider id, e.g. { e2b: 0.00005 })",
      )
    }
    this.name = o.name ?? 'budget'
    this.maxTotalTokens = o.maxTotalTokens
    this.maxCost = o.maxCost
    this.priceTable = o.priceTable
    this.sandboxPricePerSecond = o.sandboxPricePerSecond
    this.instruction = o.instruction ?? DEFAULT_BUDGET_INSTRUCTION
    const table = o.priceTable
    if (table) {
      this.aroundLlmCall = async (ctx, next) => {
        const res = await next()
        const model = res?.model ?? ctx.request.model
        if (!priceOf(table, model)) await this.warnUnpriced(ctx.run, model)
        return res
      }
    }
  }

  /** Cost of `calls` under this budget's price table (0 without one). */
  costOf(calls: readonly LlmCallUsage[]): number {
    return this.priceTable ? costOfCalls(calls, this.priceTable).cost : 0
  }

  /** Cost of the sandbox time of `toolCalls` under `sandboxPricePerSecond` (0 without it; unpriced providers cost 0). */
  sandboxCostOf(toolCalls: AgentRunState['toolCalls']): number {
    const prices = this.sandboxPricePerSecond
    if (!prices) return 0
    return Object.entries(sandboxSecondsOf(toolCalls)).reduce(
      (sum, [p, sec]) => sum + sec * (prices[p] ?? 0),
      0,
    )
  }

  /** Forces a final answer once a limit is reached (checked before every iteration). */
  decide(state: AgentRunState): LoopDecision | undefined {
    if (this.maxTotalTokens !== undefined && state.usage.totalTokens >= this.maxTotalTokens) {
      return LoopDecision.finishNow(ForcedStop.budgetExceeded(), this.instruction)
    }
    if (
      this.maxCost !== undefined &&
      this.costOf(state.llmCalls) + this.sandboxCostOf(state.toolCalls) >= this.maxCost
    ) {
      return LoopDecision.finishNow(ForcedStop.budgetExceeded(), this.instruction)
    }
    return undefined
  }

  private async warnUnpriced(run: AgentRun, model: string): Promise<void> {
    let seen = this.warned.get(run)
    if (!seen) this.warned.set(run, (seen = new Set()))
    if (seen.has(model)) return
    seen.add(model)
    await run.warn(
      this.name,
      `model "${model}" is not in the BudgetInterceptor price table, so its calls count as cost 0; add it to priceTable or rely on maxTotalTokens`,
      { model },
    )
  }
}
