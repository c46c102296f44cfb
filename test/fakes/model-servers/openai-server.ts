import { randomUUID } from 'node:crypto'
import { startScriptedServer, type ScriptedReply, type ScriptedServer } from './scripted-server.js'

/** The key the fake accepts (anything else gets the API's 401, echoing the key as OpenAI does). */
export const OPENAI_TEST_KEY = 'sk-test-fake-openai-5f1c0d9e'

/** A scripted chat-completions server; `baseURL` is what `openAICompatible` takes. */
export interface OpenAIFakeServer extends ScriptedServer {
  readonly baseURL: string
}

/** Starts a fake `POST /v1/chat/completions` on 127.0.0.1 (port 0). */
export async function startOpenAIServer(apiKey: string = OPENAI_TEST_KEY): Promise<OpenAIFakeServer> {
  const server = await startScriptedServer({
    method: 'POST',
    path: '/v1/chat/completions',
    authenticate: (headers) =>
      headers.authorization === `Bearer ${apiKey}`
        ? undefined
        : openAIError(401, `Incorrect API key provided: ${String(headers.authorization).slice(7)}.`, {
            type: 'invalid_request_error',
            code: 'invalid_api_key',
          }),
    error: (status, message) => openAIError(status, message),
    responseHeaders: () => ({ 'x-request-id': `req_${randomUUID()}` }),
  })
  return Object.assign(server, { baseURL: `${server.origin}/v1` })
}

/** A tool call as the wire carries it. */
export interface WireToolCall {
  readonly id: string
  readonly name: string
  /** Raw JSON text, as the model produced it. */
  readonly arguments: string
}

/** Usage as the wire carries it (details optional, as many compatible servers omit them). */
export interface WireUsage {
  readonly prompt_tokens: number
  readonly completion_tokens: number
  readonly total_tokens?: number
  readonly prompt_tokens_details?: { cached_tokens?: number; audio_tokens?: number }
  readonly completion_tokens_details?: { reasoning_tokens?: number; audio_tokens?: number }
}

/** A 200 chat completion with one choice. */
export function chatCompletion(opts: {
  content?: string | null
  toolCalls?: readonly WireToolCall[]
  refusal?: string | null
  finishReason?: string
  usage?: WireUsage
  model?: string
}): ScriptedReply {
  const toolCalls = opts.toolCalls ?? []
  const usage = opts.usage && {
    total_tokens: opts.usage.prompt_tokens + opts.usage.completion_tokens,
    ...opts.usage,
  }
  return {
    kind: 'json',
    status: 200,
    body: {
      id: `chatcmpl-${randomUUID()}`,
      object: 'chat.completion',
      created: Math.floor(Date.now() / 1000),
      model: opts.model ?? 'gpt-fake-2026-01-01',
      system_fingerprint: 'fp_fake',
      choices: [
        {
          index: 0,
          message: {
            role: 'assistant',
            content: opts.content === undefined ? null : opts.content,
            refusal: opts.refusal ?? null,
            annotations: [],
            ...(toolCalls.length > 0 && {
              tool_calls: toolCalls.map((call) => ({
                id: call.id,
                type: 'function',
                function: { name: call.name, arguments: call.arguments },
              })),
            }),
          },
          logprobs: null,
          finish_reason: opts.finishReason ?? (toolCalls.length > 0 ? 'tool_calls' : 'stop'),
        },
      ],
      ...(usage && { usage }),
    },
  }
}

/** An API error in OpenAI's format: `{ error: { message, type, param, code } }`. */
export function openAIError(
  status: number,
  message: string,
  opts: { type?: string; code?: string | null; headers?: Record<string, string> } = {},
): ScriptedReply {
  return {
    kind: 'json',
    status,
    body: {
      error: {
        message,
        type: opts.type ?? (status >= 500 ? 'server_error' : 'invalid_request_error'),
        param: null,
        code: opts.code ?? null,
      },
    },
    ...(opts.headers && { headers: opts.headers }),
  }
}
