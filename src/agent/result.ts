import type { ToolCallRecord } from './agent-interceptor.js'
import type { FinishReason } from './finish-reason.js'
import type { ChatMessage, Usage } from './model-client.js'
import type { LlmCallUsage } from './usage.js'

/** A warning raised during a run (also published as an ERROR event with `severity: 'warning'`). */
export interface AgentWarning {
  /** Who raised it, e.g. the interceptor name. */
  readonly source: string
  readonly message: string
  readonly attributes?: Readonly<Record<string, unknown>>
}

/** What `agent.run` resolves to. */
export interface AgentResult {
  /** The final answer (or `PROMPT_BLOCKED: <reason>`). */
  readonly output: string
  readonly finishReason: FinishReason
  /** Accumulated over every model call of the run, the forced final one included. */
  readonly usage: Usage
  /** Sandbox time of the run's routed calls, in seconds per provider that ran them. */
  readonly sandboxSeconds: Readonly<Record<string, number>>
  /** One entry per model call, with the provider-reported model id. */
  readonly llmCalls: readonly LlmCallUsage[]
  /** Every tool call of the run, in the model's order. */
  readonly toolCalls: readonly ToolCallRecord[]
  /** Iterations run (model calls made, unless an interceptor short-circuited some). */
  readonly iterations: number
  /** The conversation after the run: the history passed in, the user input and this run's messages. */
  readonly messages: readonly ChatMessage[]
  readonly runId: string
  readonly sessionId?: string
  readonly warnings: readonly AgentWarning[]
}
