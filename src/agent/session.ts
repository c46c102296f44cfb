import { randomUUID } from 'node:crypto'
import type { AgentConfig } from './config.js'
import type { CompactOptions, CompactResult } from './compact.js'
import { compactionCut, compactionRequest, DEFAULT_COMPACT_INSTRUCTION, summaryMessage } from './compact.js'
import { AgentConfigError, AgentSessionError, ModelCallError } from './errors.js'
import { RunEmitter } from './events.js'
import { NEVER_ABORTED } from './signals.js'
import type { RunOptions } from './loop.js'
import { runLoop } from './loop.js'
import type { ChatMessage, Usage } from './model-client.js'
import type { AgentResult } from './result.js'
import { addUsage, emptyUsage, normalizeUsage } from './usage.js'

/** Options of `agent.openSession`. */
export interface OpenSessionOptions {
  /** @default a random UUID */
  sessionId?: string
  /** Conversation to resume from (e.g. loaded from storage). */
  messages?: readonly ChatMessage[]
}

/**
 * A conversation across runs for one sessionId. Opening fires SESSION_START, `close()` fires
 * SESSION_END; runs are sequential (a second concurrent run is rejected).
 */
export interface AgentSession {
  readonly sessionId: string
  /** The conversation so far (without the system prompt). */
  readonly messages: readonly ChatMessage[]
  /** Accumulated over every run and compaction of the session. */
  readonly usage: Readonly<Usage>
  readonly closed: boolean
  /** Runs the agent on `input`, continuing the conversation. */
  run(input: string, options?: Pick<RunOptions, 'signal'>): Promise<AgentResult>
  /**
   * Replaces everything but the last `keepLastMessages` messages with a model-written summary and
   * fires ON_COMPACT with the {@link CompactResult}. Calls the model directly (not through
   * interceptors). A model failure rejects with `ModelCallError` and leaves the conversation unchanged.
   */
  compact(options: CompactOptions): Promise<CompactResult>
  /** Fires SESSION_END once; later runs and compactions are rejected. */
  close(): Promise<void>
}

/** Opens a session on a resolved agent config; fires SESSION_START. */
export async function openSession(cfg: AgentConfig, options: OpenSessionOptions = {}): Promise<AgentSession> {
  const sessionId = options.sessionId ?? randomUUID()
  if (typeof sessionId !== 'string' || sessionId.length === 0) {
    throw new AgentConfigError('sessionId must be a non-empty string')
  }
  const session = new Session(cfg, sessionId, [...(options.messages ?? [])])
  await session.emitter.emit('SESSION_START', 0, sessionId, { sessionId, messages: session.messages.length })
  return session
}

class Session implements AgentSession {
  readonly emitter: RunEmitter
  private history: ChatMessage[]
  private readonly total = emptyUsage()
  private busy = false
  private isClosed = false

  constructor(
    private readonly cfg: AgentConfig,
    readonly sessionId: string,
    messages: ChatMessage[],
  ) {
    this.history = messages
    this.emitter = new RunEmitter(cfg.dispatcher, 'session', sessionId)
  }

  get messages(): readonly ChatMessage[] {
    return this.history
  }
  get usage(): Readonly<Usage> {
    return this.total
  }
  get closed(): boolean {
    return this.isClosed
  }

  async run(input: string, options: Pick<RunOptions, 'signal'> = {}): Promise<AgentResult> {
    return this.exclusive('run', async () => {
      const result = await runLoop(this.cfg, input, {
        sessionId: this.sessionId,
        history: this.history,
        ...(options.signal ? { signal: options.signal } : {}),
      })
      this.history = [...result.messages]
      addUsage(this.total, result.usage)
      return result
    })
  }

  async compact(options: CompactOptions): Promise<CompactResult> {
    const keep = options?.keepLastMessages
    if (!Number.isInteger(keep) || keep < 0) {
      throw new AgentConfigError(
        `compact needs keepLastMessages as a non-negative integer, got ${String(keep)}`,
      )
    }
    return this.exclusive('compact', async () => {
      const cut = compactionCut(this.history, keep)
      let result: CompactResult
      if (cut === 0) {
        result = {
          sessionId: this.sessionId,
          compacted: false,
          removedMessages: 0,
          keptMessages: this.history.length,
          usage: emptyUsage(),
        }
      } else {
        const older = this.history.slice(0, cut)
        const kept = this.history.slice(cut)
        const request = compactionRequest(
          this.cfg.base.model,
          older,
          options.instruction ?? DEFAULT_COMPACT_INSTRUCTION,
          this.cfg.base.maxOutputTokens,
        )
        const signal = options.signal ?? NEVER_ABORTED
        let summary: string
        let usage: Usage
        let model: string
        try {
          const res = await this.cfg.model.generate(request, signal)
          summary = (res.text ?? '').trim()
          if (!summary) throw new Error('the model returned an empty summary')
          usage = normalizeUsage(res.usage)
          model = res.model ?? request.model
        } catch (err) {
          if (signal.aborted) throw signal.reason
          const e = new ModelCallError(
            `compaction failed: ${err instanceof Error ? err.message : String(err)}; the conversation is unchanged`,
            err,
          )
          await this.emitter.emit('ERROR', 0, e.message, e, { source: 'compaction' })
          throw e
        }
        this.history = [summaryMessage(summary), ...kept]
        addUsage(this.total, usage)
        result = {
          sessionId: this.sessionId,
          compacted: true,
          summary,
          removedMessages: older.length,
          keptMessages: kept.length,
          usage,
          model,
        }
      }
      await this.emitter.emit('ON_COMPACT', 0, this.sessionId, result, {
        compacted: result.compacted,
        removedMessages: result.removedMessages,
        keptMessages: result.keptMessages,
      })
      return result
    })
  }

  async close(): Promise<void> {
    if (this.isClosed) return
    this.isClosed = true
    await this.emitter.emit('SESSION_END', 0, this.sessionId, {
      sessionId: this.sessionId,
      messages: this.history.length,
      usage: { ...this.total },
    })
  }

  private async exclusive<T>(what: string, fn: () => Promise<T>): Promise<T> {
    if (this.isClosed) {
      throw new AgentSessionError(`session ${this.sessionId} is closed; open a new session to ${what} again`)
    }
    if (this.busy) {
      throw new AgentSessionError(
        `session ${this.sessionId} is busy with another run or compaction; await it before calling ${what}()`,
      )
    }
    this.busy = true
    try {
      return await fn()
    } finally {
      this.busy = false
    }
  }
}
