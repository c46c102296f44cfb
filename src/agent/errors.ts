import type { ErrorCode } from '../errors.js'
import { AppError } from '../errors.js'

/** `createAgent`, a tool definition or a built-in interceptor was given invalid options. Fails fast. */
export class AgentConfigError extends AppError {
  override readonly name = 'AgentConfigError'
  constructor(message: string, cause?: unknown) {
    super('CONFIG_INVALID', message, { cause })
  }
}

/** An {@link AgentSession} was used out of turn (closed, or a second run while one is in flight). */
export class AgentSessionError extends AppError {
  override readonly name = 'AgentSessionError'
  constructor(message: string) {
    super('CONFLICT', message)
  }
}

/**
 * A tool call could not produce output (unknown tool, bad arguments, no executor, timeout, thrown
 * error). It never fails the run: the agent turns it into an `error: <CODE>: <message>` tool result
 * the model can read and act on.
 */
export class ToolCallError extends AppError {
  override readonly name = 'ToolCallError'
  constructor(code: ErrorCode, message: string, opts: { retryable?: boolean; cause?: unknown } = {}) {
    super(code, message, opts)
  }
}

/**
 * The model client failed (network, API error, exhausted script). The run does not reject: it ends
 * with finishReason `{ kind: 'error', message }` and an ERROR lifecycle event.
 */
export class ModelCallError extends AppError {
  override readonly name = 'ModelCallError'
  constructor(message: string, cause?: unknown) {
    super('UNAVAILABLE', message, { cause, retryable: true })
  }
}
