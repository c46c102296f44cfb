import OpenAI from 'openai'
import type {
  ChatCompletion,
  ChatCompletionCreateParamsNonStreaming,
  ChatCompletionMessageParam,
  ChatCompletionTool,
} from 'openai/resources/chat/completions'
import { z } from 'zod'
import { assertNever } from '../../errors.js'
import type {
  ChatMessage,
  ModelClient,
  ModelFinishReason,
  ModelRequest,
  ModelResponse,
  ModelToolCall,
  ToolSpec,
  Usage,
} from '../model-client.js'
import { toModelError, type ProviderCallInfo, type ProviderFailure } from './errors.js'
import { parseClientOptions, systemText } from './shared.js'

/** Options of {@link openAICompatible}. */
export const OpenAICompatibleOptionsSchema = z.strictObject({
  /** Sent as `Authorization: Bearer …`; never appears in error messages. */
  apiKey: z.string().min(1),
  /** Default model id (a request's `model` wins). */
  model: z.string().min(1),
  /** Base URL of any chat-completions server, e.g. `http://127.0.0.1:8000/v1`. @default the SDK's default */
  baseURL: z.url().optional(),
  /** Per-attempt HTTP timeout (ms); timed-out attempts count as retries. @default 600000 */
  timeoutMs: z.int().positive().default(600_000),
  /** Retries the SDK makes on connection errors, timeouts, 408/409/429 and 5xx. @default 2 */
  maxRetries: z.int().nonnegative().default(2),
  /** Role of the system text: `developer` for OpenAI's reasoning models, `system` elsewhere. @default 'system' */
  systemRole: z.enum(['system', 'developer']).default('system'),
  /** Field that carries `maxOutputTokens`; older servers only know `max_tokens`. @default 'max_completion_tokens' */
  maxTokensField: z.enum(['max_completion_tokens', 'max_tokens']).default('max_completion_tokens'),
  /** Extra headers sent with every request. */
  defaultHeaders: z.record(z.string(), z.string()).optional(),
})

/** Options of {@link openAICompatible} (callers' view: defaults may be omitted). */
export type OpenAICompatibleOptions = z.input<typeof OpenAICompatibleOptionsSchema>

/**
 * A {@link ModelClient} on the official `openai` package: chat completions with function tools, against
 * OpenAI or any compatible server (`baseURL`). Not streaming.
 *
 * - System text: `systemPrompt` then `instructions` (blank line between) form one leading message with
 *   role `systemRole`; system messages of the conversation keep their place.
 * - Usage: `prompt_tokens` -> input, `completion_tokens` -> output, `prompt_tokens_details.cached_tokens`
 *   -> cachedInputTokens, `completion_tokens_details.reasoning_tokens` -> reasoningTokens; the
 *   chat-completions API reports no cache writes (0).
 * - Finish: `length` -> `length` (the loop's token_limit), `tool_calls`/`function_call` -> `tool_calls`,
 *   `content_filter` or a refusal -> `content_filter`; `stop` with tool calls (some servers) -> `tool_calls`.
 * - Errors: after the SDK's retries an API error is thrown as an `AppError` (see `errors.ts`); an
 *   aborted `signal` rethrows the signal's reason.
 *
 * @throws AppError `CONFIG_INVALID` when the options are invalid.
 */
export function openAICompatible(options: OpenAICompatibleOptions): ModelClient {
  const opts = parseClientOptions(OpenAICompatibleOptionsSchema, options, 'openAICompatible')
  const client = new OpenAI({
    apiKey: opts.apiKey,
    baseURL: opts.baseURL,
    timeout: opts.timeoutMs,
    maxRetries: opts.maxRetries,
    defaultHeaders: opts.defaultHeaders,
  })
  const info: ProviderCallInfo = {
    label: 'OpenAI-compatible API',
    baseURL: client.baseURL,
    timeoutMs: opts.timeoutMs,
    maxRetries: opts.maxRetries,
    apiKey: opts.apiKey,
  }

  return {
    model: opts.model,
    async generate(request: ModelRequest, signal: AbortSignal): Promise<ModelResponse> {
      const body = toRequestBody(request, opts.model, opts)
      let completion: ChatCompletion
      try {
        completion = await client.chat.completions.create(body, { signal })
      } catch (err) {
        signal.throwIfAborted()
        throw toModelError(classify(err), info, err)
      }
      return fromCompletion(completion)
    },
  }
}

type BodyOptions = Pick<z.output<typeof OpenAICompatibleOptionsSchema>, 'systemRole' | 'maxTokensField'>

function toRequestBody(
  request: ModelRequest,
  defaultModel: string,
  opts: BodyOptions,
): ChatCompletionCreateParamsNonStreaming {
  const messages: ChatCompletionMessageParam[] = []
  const system = systemText(request)
  if (system !== undefined) messages.push({ role: opts.systemRole, content: system })
  for (const message of request.messages) messages.push(toMessageParam(message, opts.systemRole))

  const body: ChatCompletionCreateParamsNonStreaming = { model: request.model || defaultModel, messages }
  if (request.tools.length > 0) body.tools = request.tools.map(toTool)
  if (request.temperature !== undefined) body.temperature = request.temperature
  if (request.topP !== undefined) body.top_p = request.topP
  if (request.maxOutputTokens !== undefined) body[opts.maxTokensField] = request.maxOutputTokens
  return body
}

function toMessageParam(
  message: ChatMessage,
  systemRole: 'system' | 'developer',
): ChatCompletionMessageParam {
  switch (message.role) {
    case 'system':
      return { role: systemRole, content: message.content }
    case 'user':
      return { role: 'user', content: message.content }
    case 'assistant': {
      const toolCalls = message.toolCalls ?? []
      return {
        role: 'assistant',
        content: message.content ?? null,
        ...(toolCalls.length > 0 && {
          tool_calls: toolCalls.map((call) => ({
            id: call.id,
            type: 'function' as const,
            function: { name: call.name, arguments: call.arguments },
          })),
        }),
      }
    }
    case 'tool':
      return { role: 'tool', tool_call_id: message.toolCallId, content: message.content }
    default:
      return assertNever(message)
  }
}

function toTool(tool: ToolSpec): ChatCompletionTool {
  return {
    type: 'function',
    function: { name: tool.name, description: tool.description, parameters: { ...tool.parameters } },
  }
}

function fromCompletion(completion: ChatCompletion): ModelResponse {
  const choice = completion.choices[0]
  const message = choice?.message
  const toolCalls: ModelToolCall[] = []
  for (const call of message?.tool_calls ?? []) {
    if (call.type === 'function') {
      toolCalls.push({ id: call.id, name: call.function.name, arguments: call.function.arguments })
    }
  }
  const refusal = message?.refusal ?? undefined
  const text = message?.content ?? refusal
  let finishReason = mapFinishReason(choice?.finish_reason)
  if (finishReason === 'stop' && toolCalls.length > 0) finishReason = 'tool_calls'
  if (refusal !== undefined && !message?.content) finishReason = 'content_filter'
  return {
    ...(text !== undefined && text !== null && { text }),
    ...(toolCalls.length > 0 && { toolCalls }),
    ...(completion.usage && { usage: mapUsage(completion.usage) }),
    ...(completion.model && { model: completion.model }),
    ...(finishReason && { finishReason }),
  }
}

/** Maps chat-completions usage onto {@link Usage}; fields the server does not report count as 0. */
function mapUsage(usage: NonNullable<ChatCompletion['usage']>): Usage {
  const inputTokens = usage.prompt_tokens ?? 0
  const outputTokens = usage.completion_tokens ?? 0
  return {
    inputTokens,
    outputTokens,
    totalTokens: usage.total_tokens ?? inputTokens + outputTokens,
    cachedInputTokens: usage.prompt_tokens_details?.cached_tokens ?? 0,
    cacheWriteInputTokens: 0,
    reasoningTokens: usage.completion_tokens_details?.reasoning_tokens ?? 0,
  }
}

type OpenAIFinishReason = ChatCompletion.Choice['finish_reason'] | null | undefined

function mapFinishReason(reason: OpenAIFinishReason): ModelFinishReason | undefined {
  switch (reason) {
    case 'stop':
      return 'stop'
    case 'length':
      return 'length'
    case 'tool_calls':
    case 'function_call':
      return 'tool_calls'
    case 'content_filter':
      return 'content_filter'
    case null:
    case undefined:
      return undefined
    default:
      // Compatible servers send values of their own (e.g. `eos`); treat them as a plain stop.
      return 'stop'
  }
}

/** Classifies by SDK error class and HTTP status only. */
function classify(err: unknown): ProviderFailure {
  if (err instanceof OpenAI.APIConnectionTimeoutError) return { kind: 'timeout' }
  if (err instanceof OpenAI.APIConnectionError) return { kind: 'connection' }
  if (err instanceof OpenAI.APIError && typeof err.status === 'number') {
    return { kind: 'status', status: err.status, providerMessage: providerMessage(err) }
  }
  return { kind: 'other' }
}

/** The server's own `error.message`, else the SDK's message (status plus raw body). */
function providerMessage(err: InstanceType<typeof OpenAI.APIError>): string {
  const inner: unknown = err.error
  if (inner && typeof inner === 'object' && 'message' in inner && typeof inner.message === 'string') {
    return inner.message
  }
  return err.message
}
