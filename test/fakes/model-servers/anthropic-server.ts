import { randomUUID } from 'node:crypto'
import { startScriptedServer, type ScriptedReply, type ScriptedServer } from './scripted-server.js'

/** The key the fake accepts, as `Authorization: Bearer` (what SDK 1.x sends) or `x-api-key` (older clients). */
export const ANTHROPIC_TEST_KEY = 'sk-ant-test-fake-2b7e41a9'

/** A scripted Messages API server; `baseURL` is what `anthropic` takes. */
export interface AnthropicFakeServer extends ScriptedServer {
  readonly baseURL: string
}

const ERROR_TYPES: Readonly<Record<number, string>> = {
  400: 'invalid_request_error',
  401: 'authentication_error',
  402: 'billing_error',
  403: 'permission_error',
  404: 'not_found_error',
  413: 'request_too_large',
  429: 'rate_limit_error',
  500: 'api_error',
  504: 'timeout_error',
  529: 'overloaded_error',
}

/** Starts a fake `POST /v1/messages` on 127.0.0.1 (port 0). */
export async function startAnthropicServer(
  apiKey: string = ANTHROPIC_TEST_KEY,
): Promise<AnthropicFakeServer> {
  const server = await startScriptedServer({
    method: 'POST',
    path: '/v1/messages',
    authenticate: (headers) => {
      const presented = headers['x-api-key'] ?? headers.authorization?.replace(/^Bearer /, '')
      if (presented !== apiKey) return anthropicError(401, `invalid x-api-key: ${String(presented)}`)
      if (!headers['anthropic-version']) return anthropicError(400, 'anthropic-version: header is required')
      return undefined
    },
    error: (status, message) => anthropicError(status, message),
    responseHeaders: () => ({ 'request-id': `req_${randomUUID()}` }),
  })
  return Object.assign(server, { baseURL: server.origin })
}

/** A content block of a response. */
export type WireContentBlock =
  | { type: 'text'; text: string }
  | { type: 'tool_use'; id: string; name: string; input: unknown }
  | { type: 'thinking'; thinking: string; signature: string }

/** Usage as the wire carries it. */
export interface WireUsage {
  readonly input_tokens: number
  readonly output_tokens: number
  readonly cache_read_input_tokens?: number | null
  readonly cache_creation_input_tokens?: number | null
  readonly thinking_tokens?: number
}

/** A 200 Messages API response. */
export function anthropicMessage(opts: {
  content: readonly WireContentBlock[]
  stopReason?: string | null
  usage?: WireUsage
  model?: string
}): ScriptedReply {
  const usage = opts.usage ?? { input_tokens: 10, output_tokens: 5 }
  const hasToolUse = opts.content.some((block) => block.type === 'tool_use')
  return {
    kind: 'json',
    status: 200,
    body: {
      id: `msg_${randomUUID().replaceAll('-', '')}`,
      type: 'message',
      role: 'assistant',
      model: opts.model ?? 'claude-fake-5-20260101',
      content: opts.content.map((block) =>
        block.type === 'tool_use' ? { ...block, caller: { type: 'direct' } } : block,
      ),
      stop_reason: opts.stopReason === undefined ? (hasToolUse ? 'tool_use' : 'end_turn') : opts.stopReason,
      stop_sequence: null,
      stop_details: null,
      container: null,
      diagnostics: null,
      usage: {
        input_tokens: usage.input_tokens,
        output_tokens: usage.output_tokens,
        cache_read_input_tokens: usage.cache_read_input_tokens ?? 0,
        cache_creation_input_tokens: usage.cache_creation_input_tokens ?? 0,
        cache_creation: {
          ephemeral_5m_input_tokens: usage.cache_creation_input_tokens ?? 0,
          ephemeral_1h_input_tokens: 0,
        },
        output_tokens_details:
          usage.thinking_tokens === undefined ? null : { thinking_tokens: usage.thinking_tokens },
        server_tool_use: null,
        service_tier: 'standard',
        inference_geo: null,
        speed: null,
      },
    },
  }
}

/** An API error in Anthropic's format: `{ type: 'error', error: { type, message }, request_id }`. */
export function anthropicError(
  status: number,
  message: string,
  headers?: Record<string, string>,
): ScriptedReply {
  return {
    kind: 'json',
    status,
    body: {
      type: 'error',
      error: {
        type: ERROR_TYPES[status] ?? (status >= 500 ? 'api_error' : 'invalid_request_error'),
        message,
      },
      request_id: `req_${randomUUID()}`,
    },
    ...(headers && { headers }),
  }
}
