import type { CodeLanguage } from '../sandbox/code/types.js'
import type { ExecResult, ShellMode } from '../sandbox/types.js'

/** A routeTo verdict plus what the runtime knows about the call, ready to become a job. */
export interface RouteRequest {
  readonly providerId: string
  readonly profile: string
  /** The shell command line, or the cell's source when {@link code} is set. */
  readonly command: string
  /**
   * Set for a code cell (`ToolCallDecision.routeCode`): `command` runs in the session's stateful
   * kernel of `language`, not in a shell (`cwd`, `stdin` and the shell fields do not apply).
   */
  readonly code?: { readonly language: CodeLanguage }
  /** The tool call id (the job id derives from tenant + callId). */
  readonly callId: string
  readonly toolName: string
  /** Sandbox session: calls of one session share a sandbox. Absent: an ephemeral sandbox. */
  readonly sessionId?: string
  /** Defaults to `default` in embedded mode. */
  readonly tenant?: string
  readonly cwd?: string
  readonly env?: Readonly<Record<string, string>>
  readonly stdin?: string
  /** Clamped to the profile's max; the profile default when absent. */
  readonly timeoutMs?: number
  /** A redelivered job may run again instead of reporting `interrupted`. @default false */
  readonly idempotent?: boolean
  /** The call's shell (`persistent` / `fresh`); absent: the profile's `shell`, else {@link shellDefault}. */
  readonly shell?: ShellMode
  /**
   * The surface's default when neither the call nor the profile names a shell: tool calls set
   * `persistent` (used where the provider has persistent shells, else `fresh`). @default 'fresh'
   */
  readonly shellDefault?: ShellMode
}

/** Live output and cancellation of one routed call. */
export interface RouteContext {
  readonly signal?: AbortSignal
  readonly onStdout?: (chunk: string) => void
  readonly onStderr?: (chunk: string) => void
  /** Called with the job id once the queue accepted the command (before it runs). */
  readonly onAccepted?: (jobId: string) => void
}

/**
 * Executes routeTo verdicts. The agent loop calls it; the execution plane supplies the queue-backed
 * implementation. Errors are `AppError`s (UNKNOWN_PROVIDER, UNKNOWN_PROFILE, SANDBOX_LOST,
 * JOB_INTERRUPTED, JOB_CANCELLED, ACQUIRE_TIMEOUT…; QUEUE_UNAVAILABLE as `JobNotAcceptedError` when
 * nothing was accepted, `JobOutcomeUnknownError` when an accepted job's result could not be read); the
 * agent turns them into a tool result for the model.
 */
export interface RouteExecutor {
  execute(route: RouteRequest, ctx?: RouteContext): Promise<ExecResult>
  /** The timeout the route runs with (its own or the profile default, clamped to the profile max). */
  effectiveTimeoutMs?(route: RouteRequest): number
}
