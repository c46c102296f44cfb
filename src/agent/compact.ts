import { assertNever } from '../errors.js'
import type { ChatMessage, ModelRequest, Usage } from './model-client.js'

/** Options of `AgentSession.compact`. */
export interface CompactOptions {
  /** Messages at the end of the conversation kept verbatim (moved earlier if it would split a tool call from its result). */
  keepLastMessages: number
  /** What the model is asked to produce. @default a summary preserving facts, decisions, open tasks and file names */
  instruction?: string
  signal?: AbortSignal
}

/** The outcome of a compaction; also the payload of the ON_COMPACT event. */
export interface CompactResult {
  readonly sessionId: string
  /** False when there was nothing older than `keepLastMessages` (no model call was made). */
  readonly compacted: boolean
  readonly summary?: string
  readonly removedMessages: number
  readonly keptMessages: number
  /** Usage of the summarisation call (zero when not compacted). */
  readonly usage: Usage
  /** Provider-reported model id of the summarisation call. */
  readonly model?: string
}

/** Default summarisation instruction. */
export const DEFAULT_COMPACT_INSTRUCTION =
  'Summarise the conversation transcript above for your own later use. Keep every fact, decision, result, file name, command and open task that later turns may need; drop chit-chat. Answer with the summary only.'

const SYSTEM = 'You compress conversation transcripts into faithful, dense summaries.'
const MAX_CHARS_PER_MESSAGE = 4_000

/** Index where the kept tail starts, or 0 when there is nothing to compact. Never starts the tail with a tool result. */
export function compactionCut(messages: readonly ChatMessage[], keepLastMessages: number): number {
  let cut = messages.length - keepLastMessages
  while (cut > 0 && messages[cut]?.role === 'tool') cut--
  return Math.max(cut, 0)
}

/**
 * The summarisation request: older messages rendered as one plain-text transcript (so no provider
 * sees dangling tool calls), no tools.
 */
export function compactionRequest(
  model: string,
  older: readonly ChatMessage[],
  instruction: string,
  maxOutputTokens: number | undefined,
): ModelRequest {
  return {
    model,
    systemPrompt: SYSTEM,
    ...(maxOutputTokens !== undefined ? { maxOutputTokens } : {}),
    messages: [
      { role: 'user', content: `<transcript>\n${transcript(older)}\n</transcript>\n\n${instruction}` },
    ],
    tools: [],
    isLastIteration: true,
  }
}

/** The message that replaces the compacted part of the conversation. */
export function summaryMessage(summary: string): ChatMessage {
  return { role: 'user', content: `Summary of the earlier conversation:\n${summary}` }
}

function transcript(messages: readonly ChatMessage[]): string {
  return messages.map(line).join('\n')
}

function line(m: ChatMessage): string {
  switch (m.role) {
    case 'system':
    case 'user':
      return `${m.role}: ${clip(m.content)}`
    case 'assistant': {
      const calls = (m.toolCalls ?? []).map((c) => `[called ${c.name}(${clip(c.arguments)})]`)
      return `assistant: ${[m.content ? clip(m.content) : '', ...calls].filter(Boolean).join(' ')}`
    }
    case 'tool':
      return `tool ${m.name} result: ${clip(m.content)}`
    default:
      return assertNever(m)
  }
}

function clip(text: string): string {
  return text.length > MAX_CHARS_PER_MESSAGE ? `${text.slice(0, MAX_CHARS_PER_MESSAGE)}… [clipped]` : text
}
