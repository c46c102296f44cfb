import type { ToolCallRequest } from '../interceptors/types.js'
import type { Logger } from '../logger.js'
import type { ExecResult, ProcessInfo, ProcessOutput, SandboxHealth } from '../sandbox/types.js'
import type { CodeLanguage, CodeResult } from '../sandbox/code/types.js'
import type { CircuitState } from '../routing/circuit-breaker.js'
import type { ServiceEventLog } from '../lifecycle/service-events.js'
import type { SessionStreamService } from '../runtime/session-streams.js'
import type { AdminRoutesOptions } from './admin.js'
import type { E2BEndpointDeps } from './e2b/index.js'
import type { Keyring, Principal } from './keyring.js'

/** A command submitted over the API. */
export interface ExecInput {
  provider: string
  profile: string
  command: string
  sessionId?: string
  cwd?: string
  env?: Record<string, string>
  stdin?: string
  timeoutMs?: number
  idempotent?: boolean
  /** `persistent`: the session's long-lived shell; absent: the profile's shell, else `fresh`. */
  shell?: 'persistent' | 'fresh'
}

/**
 * Where a job is. `unknown`: the job was accepted, but its state could not be read (Redis away past
 * the wait, or its record gone); `error` says why and what to do.
 */
export type JobState = 'queued' | 'running' | 'completed' | 'failed' | 'interrupted' | 'cancelled' | 'unknown'

/** A job as the API shows it (tenant-scoped). */
export interface JobView {
  id: string
  state: JobState
  provider: string
  profile: string
  sessionId?: string
  result?: ExecResult
  error?: { code: string; message: string }
  /**
   * For an `interrupted` job: the bounded tail of the output its attempt had published before it was
   * interrupted. Partial by nature: the command may have printed more.
   */
  partialOutput?: { stdout: string; stderr: string }
  createdAt: number
  finishedAt?: number
}

/**
 * A live event of a job: output chunks, then its final view. `id` is the job's output bytes up to
 * the end of the event (the SSE id a reader resumes after); `missed` says that many bytes before
 * `id` were no longer retained when the reader asked for them.
 */
export type JobEvent =
  | { type: 'stdout' | 'stderr'; data: string; id: number }
  | { type: 'missed'; bytes: number; id: number }
  | { type: 'result'; job: JobView }

/** Commands as jobs. Every method is tenant-scoped: another tenant's ids are `undefined`. */
export interface ExecService {
  /** Submits (or finds, for a repeated `callId`) a job. */
  submit(tenant: string, input: ExecInput, opts: { callId: string }): Promise<JobView>
  /**
   * Waits until the job is terminal, the deadline passes (returns the current view) or the signal
   * aborts. Redis outages are ridden out until the deadline; rejects with QUEUE_UNAVAILABLE when Redis
   * stayed away. `undefined` when the job is not (or no longer: lost, past retention) the tenant's.
   */
  wait(
    tenant: string,
    id: string,
    opts: { timeoutMs: number; signal?: AbortSignal },
  ): Promise<JobView | undefined>
  get(tenant: string, id: string): Promise<JobView | undefined>
  /** The tenant's recent jobs (within retention), newest first; optionally of one session. */
  list(tenant: string, filter: { sessionId?: string; limit: number }): Promise<JobView[]>
  cancel(tenant: string, id: string): Promise<JobView | undefined>
  /**
   * The job's retained output past `after` (default 0: all of it, for a reader reattaching), then
   * live output, then the result; ends after the result. Each chunk once, in order. `undefined` when
   * the job is not the tenant's.
   */
  events(
    tenant: string,
    id: string,
    signal: AbortSignal,
    opts?: { after?: number },
  ): Promise<AsyncIterable<JobEvent> | undefined>
}

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

/** A sandbox session as the API shows it. */
export interface SessionView {
  id: string
  provider: string
  profile: string
  /** Bound sandbox id, once the first call ran. */
  sandboxId?: string
  createdAt: number
  /**
   * Set when the session's sandbox was replaced by an empty one (its files are lost), until
   * `POST /v1/sessions/{id}/ack` or the session is deleted.
   */
  sandboxReplaced?: {
    at: number
    reason: string
    filesLost: true
    previousSandboxId: string
    /** The profile's persistent `/workspace` was kept. */
    workspaceKept?: true
  }
}

/** Tenant-scoped sessions and their files. */
export interface SessionService {
  /**
   * Records a session. With `admit`, refuses (429 QUOTA_EXCEEDED) a session whose first use could not
   * get a sandbox, instead of recording one whose every call would be refused.
   */
  create(
    tenant: string,
    input: { id?: string; provider: string; profile: string },
    opts?: { admit?: boolean },
  ): Promise<SessionView>
  list(tenant: string): Promise<SessionView[]>
  get(tenant: string, id: string): Promise<SessionView | undefined>
  /** Destroys its sandboxes. `false` when not the tenant's. */
  delete(tenant: string, id: string): Promise<boolean>
  /** Clears the session's `sandboxReplaced` notice; the view after it, or undefined when not the tenant's. */
  acknowledge(tenant: string, id: string): Promise<SessionView | undefined>
  /** Undefined when there is no such session; a missing file is `NOT_FOUND` naming the path. */
  readFile(tenant: string, id: string, path: string): Promise<Uint8Array | undefined>
  /** Undefined when there is no such session; else the session's `sandboxReplaced` notice, if any. */
  writeFile(
    tenant: string,
    id: string,
    path: string,
    data: Uint8Array,
  ): Promise<Pick<SessionView, 'sandboxReplaced'> | undefined>
}

/** A snapshot as the API shows it (records: src/runtime/snapshot-directory.ts). */
export interface SnapshotView {
  id: string
  provider: string
  profile: string
  /** The session it was taken from. */
  sessionId: string
  createdAt: number
  /**
   * `creating` while it is being taken; `ready` once sessions can start from it; `failed` when it
   * was still being taken past the bound (the process taking it stopped): see `reason`.
   */
  state: 'creating' | 'ready' | 'failed'
  /** Bytes of the captured workspace. */
  workspaceBytes: number
  /** Why a `failed` snapshot failed, and what to do. */
  reason?: string
}

/** What `POST /v1/sessions/{id}/fork` made. */
export interface ForkResult {
  /** The new sessions, each with its own copy of the source's workspace. */
  sessions: SessionView[]
  /** The snapshot the forks were made from, when kept (`keepSnapshot`). */
  snapshot?: SnapshotView
}

/**
 * Tenant-scoped snapshots of sessions (docs/workspaces.md). Methods answer `undefined` / `false`
 * when the session or snapshot is not the tenant's (404); `UNSUPPORTED` on a provider without them.
 */
export interface SnapshotService {
  create(tenant: string, sessionId: string): Promise<SnapshotView | undefined>
  list(tenant: string): Promise<SnapshotView[]>
  get(tenant: string, id: string): Promise<SnapshotView | undefined>
  delete(tenant: string, id: string): Promise<boolean>
  /** A new session whose sandboxes start from the snapshot (`NOT_FOUND` when it is not the tenant's). */
  startSession(
    tenant: string,
    input: { id?: string; provider?: string; profile?: string; snapshot: string },
  ): Promise<SessionView>
  /** Snapshot of the session and `count` new sessions from it, in one call. */
  fork(
    tenant: string,
    sessionId: string,
    opts: { count: number; keepSnapshot: boolean },
  ): Promise<ForkResult | undefined>
}

/** What starting a background process takes over the API. */
export interface ProcessStartInput {
  command: string
  cwd?: string
  env?: Record<string, string>
}

/**
 * Tenant-scoped background processes of a session's sandbox. Every method answers `undefined` when
 * the session is not the tenant's (so another tenant's key gets 404); an unknown process id is
 * `NOT_FOUND`, a provider without processes `UNSUPPORTED`.
 */
export interface ProcessService {
  start(tenant: string, sessionId: string, input: ProcessStartInput): Promise<ProcessInfo | undefined>
  list(tenant: string, sessionId: string): Promise<ProcessInfo[] | undefined>
  get(tenant: string, sessionId: string, id: string): Promise<ProcessInfo | undefined>
  read(
    tenant: string,
    sessionId: string,
    id: string,
    from: { stdoutOffset: number; stderrOffset: number; maxBytes: number; waitMs?: number },
  ): Promise<ProcessOutput | undefined>
  writeStdin(
    tenant: string,
    sessionId: string,
    id: string,
    data: Uint8Array,
    close: boolean,
  ): Promise<{ written: number; process: ProcessInfo } | undefined>
  signal(
    tenant: string,
    sessionId: string,
    id: string,
    signal: string,
    waitMs: number,
  ): Promise<ProcessInfo | undefined>
  remove(tenant: string, sessionId: string, id: string): Promise<ProcessInfo | undefined>
}

/** One cell for `POST /v1/sessions/{id}/code`. */
export interface RunCodeInput {
  code: string
  language: CodeLanguage
  /** Defaults to the session profile's `defaultTimeoutMs`; at most its `maxTimeoutMs`. */
  timeoutMs?: number
  env?: Record<string, string>
}

/**
 * Tenant-scoped code interpreter of a session's sandbox (a stateful kernel per language). Answers
 * `undefined` when the session is not the tenant's; a sandbox without one is `UNSUPPORTED`.
 */
export interface CodeService {
  run(
    tenant: string,
    sessionId: string,
    input: RunCodeInput,
    opts?: { signal?: AbortSignal },
  ): Promise<CodeResult | undefined>
}

/** Provider registry view for `GET /v1/providers`. */
export interface ProviderView {
  id: string
  health: SandboxHealth
  /** The provider's circuit (routing policies skip an open one). */
  circuit?: CircuitState
  /** What the provider enforces of a profile's egress policy. */
  egress?: {
    allowlist: boolean
    mechanism?: string
    enforces?: string[]
    refuses?: string[]
    reason?: string
  }
  profiles: {
    name: string
    cpu: number
    memoryMb: number
    network: string
    /** `runc` or `runsc` (gVisor). */
    runtime: string
    defaultTimeoutMs: number
    maxTimeoutMs: number
  }[]
  /** Runtimes the provider's engine offers (Docker: its registered runtimes); absent when unknown. */
  runtimes?: string[]
  /** Docker with `queue.engineRouting`: each engine of the fleet, its state and load. */
  engines?: {
    id: string
    state: 'live' | 'down'
    draining: boolean
    running: number
    cap?: number
    seenAt: number
    reason?: string
  }[]
  /** Which of persistent workspaces, snapshots and forks the provider supports (docs/workspaces.md). */
  workspaces?: { persistent: boolean; snapshots: boolean; fork: boolean }
}

/** A routing policy for `GET /v1/providers` (config `routing.policies`). */
export interface PolicyView {
  name: string
  mode: string
  candidates: { provider: string; profile: string; weight: number; pricePerSecond?: number }[]
}

/** An agent run as the API shows it. */
export interface AgentRunView {
  id: string
  state: 'queued' | 'running' | 'completed' | 'failed' | 'cancelled'
  request: {
    input: string
    sessionId?: string
    model?: string
    maxIterations?: number
    budget?: { maxTotalTokens?: number }
  }
  output?: string
  finishReason?: string
  usage?: {
    [
      K in
        | 'inputTokens'
        | 'outputTokens'
        | 'totalTokens'
        | 'cachedInputTokens'
        | 'cacheWriteInputTokens'
        | 'reasoningTokens'
    ]: number
  }
  llmCalls?: number
  iterations?: number
  toolCalls?: { name: string; callId: string; routed: boolean; error?: string }[]
  error?: { code: string; message: string }
  /** Set while queued when nothing will pick the run up (fleet: no agent-run worker connected). */
  warning?: string
  createdAt: number
  finishedAt?: number
}

/** Queued agent runs, tenant-scoped. */
export interface AgentRunsApi {
  submit(tenant: string, input: AgentRunView['request']): Promise<AgentRunView>
  get(tenant: string, id: string): Promise<AgentRunView | undefined>
  cancel(tenant: string, id: string): Promise<AgentRunView | undefined>
  stream(
    tenant: string,
    id: string,
    signal: AbortSignal,
  ): Promise<
    | AsyncIterable<
        | {
            kind: 'event'
            event: { seq: number; type: string; step: number; message?: string; timestamp: number }
          }
        | { kind: 'end'; run: AgentRunView }
      >
    | undefined
  >
}

/** A tenant's view of the metrics: only the series whose `tenant` label is this tenant. */
export interface MetricsScope {
  readonly tenant: string
}

/** Everything `createApp` needs. No env reads, no listening: the composition root builds these. */
export interface AppDeps {
  keyring: Keyring
  logger: Logger
  exec: ExecService
  toolCalls: ToolCallService
  sessions: SessionService
  /** Background processes of sessions (`/v1/sessions/{id}/processes`); absent: those routes answer 501. */
  processes?: ProcessService
  /** The code interpreter of sessions (`POST /v1/sessions/{id}/code`); absent: that route answers 501. */
  code?: CodeService
  /** Snapshots and forks (`/v1/snapshots`, `/v1/sessions/{id}/snapshots|fork`); absent: 501. */
  snapshots?: SnapshotService
  agentRuns: AgentRunsApi
  providers(): Promise<ProviderView[]>
  /** The routing policies. @default none */
  policies?(): PolicyView[]
  /** The service's lifecycle events (circuit transitions) for `GET /v1/events`; absent: 501. */
  serviceEvents?: Pick<ServiceEventLog, 'stream'>
  /** Named readiness checks (`redis`, `docker`, …). */
  readiness(): Promise<Record<string, SandboxHealth>>
  /**
   * Prometheus text exposition: every series, or with `scope` only the series labelled with that
   * tenant (what a non-admin key may read).
   */
  metrics(scope?: MetricsScope): Promise<string>
  /** The queue dashboard at `/admin/queues` (fleet mode). */
  admin?: Pick<AdminRoutesOptions, 'queues'>
  /**
   * Ports and terminals of sessions (`/v1/sessions/{id}/ports/…`, `/v1/sessions/{id}/terminal`).
   * Absent in a process without a sandbox engine (`sbx api`): those routes answer 501 UNSUPPORTED.
   */
  streams?: SessionStreamService
  /** The MCP endpoint at `/mcp`, when enabled. */
  mcp?: {
    handle(req: Request, principal: Principal): Promise<Response>
    /** Refuses (403 FORBIDDEN) a `Host` or `Origin` that is not allowed; runs before authentication. */
    checkHeaders?(headers: Headers): void
  }
  /** The E2B-compatible endpoint (`/v2/sandboxes`, envd); absent: not served. */
  e2b?: E2BEndpointDeps
  limits?: {
    bodyLimitBytes?: number
    fileLimitBytes?: number
    requestsPerSecond?: number
    maxWaitMs?: number
    /** SSE streams send `: keepalive` after this long without an event (ms). @default 15000 */
    sseKeepAliveMs?: number
  }
  version?: string
}
