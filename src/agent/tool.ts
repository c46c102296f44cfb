import type { InterceptorContext } from '../interceptors/types.js'

/** JSON Schema of a tool's parameters (an object schema). */
export type JsonSchema = Readonly<Record<string, unknown>>

/** What a locally executed tool receives besides its parsed arguments. */
export interface ToolExecuteContext extends InterceptorContext {
  readonly callId: string
  readonly signal: AbortSignal
}

/**
 * A tool offered to the model. Without `execute` the tool never runs on the host: its calls must be
 * routed (routeTo) or they end in an error result.
 */
export interface Tool<Args = unknown> {
  readonly name: string
  readonly description: string
  /** JSON Schema, or any schema with a `toJSONSchema()`/zod schema (converted by the agent). */
  readonly parameters: unknown
  /** Local execution. Its string result (or JSON of any other value) becomes the tool output. */
  readonly execute?: (args: Args, ctx: ToolExecuteContext) => unknown
  /** Per-call timeout for local execution (ms). */
  readonly timeoutMs?: number
}
