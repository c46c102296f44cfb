import type { ToolCallRequest } from '../interceptors/types.js'
import type { CodeLanguage } from '../sandbox/code/types.js'
import type { ExecResult } from '../sandbox/types.js'
import type { JobState } from './exec.js'

/** The server's interceptor chain applied to one tool call. */
export interface ToolCallEvaluation {
  decision: {
    kind: 'allow' | 'block' | 'routeTo'
    reason?: string
    providerId?: string
    profile?: string
    command?: string
    /** A routed code cell (`routeCode`): `command` is the cell, run in the session's kernel of `language`. */
    run?: { kind: 'code'; language: CodeLanguage }
    decidedBy?: string
  }
  /** The effective request after modifies. */
  request: ToolCallRequest
  /**
   * The model-facing text (the tool-result format of docs/agent.md), for blocked and routed calls:
   * what the agent loop feeds its model for the same call. Absent for allowed calls (the caller runs them).
   */
  output?: string
  /** How the call ended, whenever `output` is set: `ok` (ran; any exit code), `error`, `blocked`. */
  outcome?: 'ok' | 'error' | 'blocked'
  /** For routed calls: the raw result, and whether the after-chain blocked the output. */
  result?: ExecResult
  blocked?: boolean
  /** For routed calls: the job that ran the command (`GET /v1/jobs/:id`) and its state. */
  job?: { id: string; state: JobState }
}

/** Evaluates tool calls through the server's configured interceptors and extensions. */
export interface ToolCallService {
  evaluate(
    tenant: string,
    request: ToolCallRequest,
    opts: ToolCallEvaluateOptions,
  ): Promise<ToolCallEvaluation>
}

/** How one evaluated call runs when it is routed. */
export interface ToolCallEvaluateOptions {
  sessionId?: string
  /** Cancels the call: a routed command is killed in its sandbox. */
  signal?: AbortSignal
  /** The routed command's timeout (ms). @default the profile's default timeout */
  timeoutMs?: number
  /** Live output of a routed command, as it arrives (best effort; the result carries it whole). */
  onStdout?: (chunk: string) => void
  onStderr?: (chunk: string) => void
}
