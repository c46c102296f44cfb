import type { JsonSchema } from './tool.js'

/** A tool call the model asked for. `arguments` is the raw JSON string the model produced. */
export interface ModelToolCall {
  readonly id: string
  readonly name: string
  readonly arguments: string
}

/** One message of the conversation the agent keeps. */
export type ChatMessage =
  | { readonly role: 'system'; readonly content: string }
  | { readonly role: 'user'; readonly content: string }
  | { readonly role: 'assistant'; readonly content?: string; readonly toolCalls?: readonly ModelToolCall[] }
  | { readonly role: 'tool'; readonly toolCallId: string; readonly name: string; readonly content: string }

/** A tool as offered to the model. */
export interface ToolSpec {
  readonly name: string
  readonly description: string
  readonly parameters: JsonSchema
}

/** Token usage of one model call or of a whole run. Cached and cache-write are subsets of input; reasoning of output. */
export interface Usage {
  inputTokens: number
  outputTokens: number
  totalTokens: number
  cachedInputTokens: number
  cacheWriteInputTokens: number
  reasoningTokens: number
}

/** What a {@link ModelClient} is asked. */
export interface ModelRequest {
  readonly model: string
  readonly systemPrompt?: string
  readonly instructions?: string
  readonly temperature?: number
  readonly topP?: number
  readonly maxOutputTokens?: number
  readonly messages: readonly ChatMessage[]
  /** Empty on a forced-final iteration (tools are withheld). */
  readonly tools: readonly ToolSpec[]
  readonly isLastIteration: boolean
}

/** Why the model stopped, normalised across providers. */
export type ModelFinishReason = 'stop' | 'tool_calls' | 'length' | 'content_filter' | 'error'

/** What a {@link ModelClient} answers. */
export interface ModelResponse {
  readonly text?: string
  readonly toolCalls?: readonly ModelToolCall[]
  readonly usage?: Partial<Usage>
  /** The provider-reported model id. */
  readonly model?: string
  readonly finishReason?: ModelFinishReason
}

/** A chat model behind one interface (OpenAI-compatible, Anthropic, scripted…). */
export interface ModelClient {
  /** The model id used when a request does not override it. */
  readonly model: string
  generate(request: ModelRequest, signal: AbortSignal): Promise<ModelResponse>
}
