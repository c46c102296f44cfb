import Anthropic from '@anthropic-ai/sdk'
import type {
  Message,
  MessageCreateParamsNonStreaming,
  StopReason,
} from '@anthropic-ai/sdk/resources/messages'
import { z } from 'zod'
import type {
  ModelClient,
  ModelFinishReason,
  ModelRequest,
  ModelResponse,
  ModelToolCall,
  Usage,
} from '../model-client.js'
import { toConversation } from './anthropic-messages.js'
import { toModelError, type ProviderCallInfo, type ProviderFailure } from './errors.js'
import { parseClientOptions } from './shared.js'

/** Options of {@link anthropic}. */
export const AnthropicOptionsSchema = z.strictObject({
  /** The API key (this SDK sends it as `Authorization: Bearer …`); never appears in error messages. */
  apiKey: z.string().min(1),
  /** Default model id (a request's `model` wins). */
  model: z.string().min(1),
  /** Base URL of the Messages API (without `/v1`). @default the SDK's default */
  baseURL: z.url().optional(),
  /**
   * Per-attempt HTTP timeout (ms); timed-out attempts count as retries. Always passed to the SDK, so its
   * "streaming is required for large max_tokens" guard does not apply. @default 600000
   */
  timeoutMs: z.int().positive().default(600_000),
  /** Retries the SDK makes on connection errors, timeouts, 408/409/429 and 5xx (incl. 529). @default 2 */
  maxRetries: z.int().nonnegative().default(2),
  /** `max_tokens` when the request sets no `maxOutputTokens` (the API requires one). @default 4096 */
  defaultMaxOutputTokens: z.int().positive().default(4096),
  /**
   * Send the top-level `cache_control: { type: 'ephemeral' }`, which puts a prompt-cache breakpoint on
   * the last cacheable block; an agent loop resends its growing conversation, so reads repay the
   * cache writes. @default true
   */
  promptCaching: z.boolean().default(true),
  /** Extra headers sent with every request. */
  defaultHeaders: z.record(z.string(), z.string()).optional(),
})

/** Options of {@link anthropic} (callers' view: defaults may be omitted). */
export type AnthropicOptions = z.input<typeof AnthropicOptionsSchema>

/**
 * A {@link ModelClient} on `@anthropic-ai/sdk` (Messages API, tool_use / tool_result blocks). Not
 * streaming.
 *
 * - Request mapping: see `toConversation` (system text, turn merging, withheld tools).
 *   `maxOutputTokens` -> `max_tokens` (default `defaultMaxOutputTokens`). `temperature` and `topP`
 *   are not sent: the Messages API version this SDK speaks has no sampling parameters.
 * - Usage: Anthropic's `input_tokens` excludes cached tokens, so
 *   `inputTokens = input_tokens + cache_read_input_tokens + cache_creation_input_tokens`, with
 *   cachedInputTokens = `cache_read_input_tokens` and cacheWriteInputTokens =
 *   `cache_creation_input_tokens` (both subsets of input); outputTokens = `output_tokens`,
 *   reasoningTokens = `output_tokens_details.thinking_tokens` (subset of output);
 *   totalTokens = inputTokens + outputTokens.
 * - Finish: `end_turn`/`stop_sequence`/`pause_turn` -> `stop`, `tool_use` -> `tool_calls`,
 *   `max_tokens`/`model_context_window_exceeded` -> `length` (the loop's token_limit),
 *   `refusal` -> `content_filter`.
 * - Errors: after the SDK's retries an API error is thrown as an `AppError` carrying the API's
 *   `error.message` (see `errors.ts`); an aborted `signal` rethrows the signal's reason.
 *
 * @throws AppError `CONFIG_INVALID` when the options are invalid.
 */
export function anthropic(options: AnthropicOptions): ModelClient {
  const opts = parseClientOptions(AnthropicOptionsSchema, options, 'anthropic')
  const client = new Anthropic({
    // A key passed in code is the SDK's only credential: it reads none from the environment.
    apiKey: opts.apiKey,
    baseURL: opts.baseURL,
    timeout: opts.timeoutMs,
    maxRetries: opts.maxRetries,
    defaultHeaders: opts.defaultHeaders,
  })
  const info: ProviderCallInfo = {
    label: 'Anthropic Messages API',
    baseURL: client.baseURL,
    timeoutMs: opts.timeoutMs,
    maxRetries: opts.maxRetries,
    apiKey: opts.apiKey,
  }

  return {
    model: opts.model,
    async generate(request: ModelRequest, signal: AbortSignal): Promise<ModelResponse> {
      const conversation = toConversation(request)
      const body: MessageCreateParamsNonStreaming = {
        model: request.model || opts.model,
        max_tokens: request.maxOutputTokens ?? opts.defaultMaxOutputTokens,
        messages: conversation.messages,
        ...(conversation.system && { system: conversation.system }),
        ...(conversation.tools && { tools: conversation.tools }),
        ...(conversation.toolChoice && { tool_choice: conversation.toolChoice }),
        ...(opts.promptCaching && { cache_control: { type: 'ephemeral' as const } }),
      }
      let message: Message
      try {
        message = await client.messages.create(body, { signal })
      } catch (err) {
        signal.throwIfAborted()
        throw toModelError(classify(err), info, err)
      }
      return fromMessage(message)
    },
  }
}

function fromMessage(message: Message): ModelResponse {
  let text = ''
  const toolCalls: ModelToolCall[] = []
  for (const block of message.content) {
    if (block.type === 'text') text += block.text
    else if (block.type === 'tool_use') {
      toolCalls.push({ id: block.id, name: block.name, arguments: JSON.stringify(block.input ?? {}) })
    }
    // Thinking and server-tool blocks are not part of our conversation model; they are dropped.
  }
  const finishReason = mapStopReason(message.stop_reason)
  return {
    ...(text && { text }),
    ...(toolCalls.length > 0 && { toolCalls }),
    ...(message.usage && { usage: mapUsage(message.usage) }),
    ...(message.model && { model: message.model }),
    ...(finishReason && { finishReason }),
  }
}

/** See {@link anthropic} for the arithmetic: our input includes the cache tokens Anthropic reports apart. */
function mapUsage(usage: Message['usage']): Usage {
  const cachedInputTokens = usage.cache_read_input_tokens ?? 0
  const cacheWriteInputTokens = usage.cache_creation_input_tokens ?? 0
  const inputTokens = (usage.input_tokens ?? 0) + cachedInputTokens + cacheWriteInputTokens
  const outputTokens = usage.output_tokens ?? 0
  return {
    inputTokens,
    outputTokens,
    totalTokens: inputTokens + outputTokens,
    cachedInputTokens,
    cacheWriteInputTokens,
    reasoningTokens: usage.output_tokens_details?.thinking_tokens ?? 0,
  }
}

function mapStopReason(reason: StopReason | null): ModelFinishReason | undefined {
  switch (reason) {
    case 'end_turn':
    case 'stop_sequence':
    case 'pause_turn':
      return 'stop'
    case 'tool_use':
      return 'tool_calls'
    case 'max_tokens':
    case 'model_context_window_exceeded':
      return 'length'
    case 'refusal':
      return 'content_filter'
    case null:
      return undefined
    default:
      // A stop reason newer than this SDK: report a plain stop rather than fail the run.
      return 'stop'
  }
}

/** Classifies by SDK error class and HTTP status only. */
function classify(err: unknown): ProviderFailure {
  if (err instanceof Anthropic.APIConnectionTimeoutError) return { kind: 'timeout' }
  if (err instanceof Anthropic.APIConnectionError) return { kind: 'connection' }
  if (err instanceof Anthropic.APIError && typeof err.status === 'number') {
    return { kind: 'status', status: err.status, providerMessage: err.apiMessage ?? err.message }
  }
  return { kind: 'other' }
}
