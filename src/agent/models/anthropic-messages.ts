import type {
  ContentBlockParam,
  MessageParam,
  TextBlockParam,
  Tool,
  ToolResultBlockParam,
} from '@anthropic-ai/sdk/resources/messages'
import { assertNever } from '../../errors.js'
import type { ChatMessage, ModelRequest, ToolSpec } from '../model-client.js'

/** The conversation part of a Messages API request. */
export interface AnthropicConversation {
  /** Top-level `system` blocks; absent when there is no system text. */
  readonly system?: TextBlockParam[]
  readonly messages: MessageParam[]
  /** Tool definitions; absent when none are offered and the history has no tool blocks. */
  readonly tools?: Tool[]
  /** `none` when tools were withheld but the history has tool blocks (see {@link toConversation}). */
  readonly toolChoice?: { type: 'none' }
}

interface Turn {
  role: 'user' | 'assistant'
  /** tool_result blocks must open a user turn, so they are kept apart from the rest. */
  results: ToolResultBlockParam[]
  blocks: ContentBlockParam[]
}

/**
 * Maps our request onto the Messages API:
 * - `system`: `systemPrompt`, then the conversation's system messages (hoisted, in order), then
 *   `instructions`, one text block each.
 * - user text -> user turn; assistant text/tool calls -> `text` + `tool_use` blocks (the raw JSON
 *   arguments parsed to an object; unparsable ones become `{ "_raw": "<string>" }`); tool results
 *   -> `tool_result` blocks. Consecutive turns of one role merge into one message with the
 *   tool_result blocks first, as the API requires after a parallel tool call. Empty texts are dropped.
 * - With tools withheld (forced-final iteration) but tool blocks in the history, the API still needs
 *   those tools declared: each used tool is declared with an empty schema and `tool_choice: none`,
 *   so the model cannot call it.
 */
export function toConversation(request: ModelRequest): AnthropicConversation {
  const systemParts: string[] = []
  if (request.systemPrompt) systemParts.push(request.systemPrompt)
  const turns: Turn[] = []
  const usedTools = new Set<string>()

  const turn = (role: Turn['role']): Turn => {
    const last = turns[turns.length - 1]
    if (last?.role === role) return last
    const created: Turn = { role, results: [], blocks: [] }
    turns.push(created)
    return created
  }

  for (const message of request.messages) {
    switch (message.role) {
      case 'system':
        if (message.content) systemParts.push(message.content)
        break
      case 'user':
        if (message.content) turn('user').blocks.push({ type: 'text', text: message.content })
        break
      case 'assistant':
        appendAssistant(message, turn, usedTools)
        break
      case 'tool':
        turn('user').results.push({
          type: 'tool_result',
          tool_use_id: message.toolCallId,
          ...(message.content && { content: message.content }),
        })
        break
      default:
        return assertNever(message)
    }
  }
  if (request.instructions) systemParts.push(request.instructions)

  const messages: MessageParam[] = turns
    .map((t) => ({ role: t.role, content: [...t.results, ...t.blocks] }))
    .filter((m) => m.content.length > 0)
  const system = systemParts.map((text): TextBlockParam => ({ type: 'text', text }))

  let tools: Tool[] | undefined
  let toolChoice: AnthropicConversation['toolChoice']
  if (request.tools.length > 0) {
    tools = request.tools.map(toTool)
  } else if (usedTools.size > 0) {
    tools = [...usedTools].map((name) => ({
      name,
      description: 'Not available on this turn.',
      input_schema: { type: 'object' },
    }))
    toolChoice = { type: 'none' }
  }
  return {
    ...(system.length > 0 && { system }),
    messages,
    ...(tools && { tools }),
    ...(toolChoice && { toolChoice }),
  }
}

function appendAssistant(
  message: Extract<ChatMessage, { role: 'assistant' }>,
  turn: (role: Turn['role']) => Turn,
  usedTools: Set<string>,
): void {
  const calls = message.toolCalls ?? []
  if (!message.content && calls.length === 0) return
  const target = turn('assistant')
  if (message.content) target.blocks.push({ type: 'text', text: message.content })
  for (const call of calls) {
    usedTools.add(call.name)
    target.blocks.push({ type: 'tool_use', id: call.id, name: call.name, input: toInput(call.arguments) })
  }
}

/** tool_use `input` must be an object; our history keeps the model's raw JSON string. */
function toInput(raw: string): Record<string, unknown> {
  try {
    const parsed: unknown = JSON.parse(raw)
    if (parsed && typeof parsed === 'object' && !Array.isArray(parsed))
      return parsed as Record<string, unknown>
  } catch {
    // fall through: keep what the model said, so the history stays faithful
  }
  return { _raw: raw }
}

function toTool(tool: ToolSpec): Tool {
  // Tool parameters are object schemas (the agent converts zod to JSON Schema); `type` is forced so
  // the API's required discriminator is present even when a hand-written schema left it out.
  const input_schema = { ...tool.parameters, type: 'object' } as Tool.InputSchema
  return { name: tool.name, description: tool.description, input_schema }
}
