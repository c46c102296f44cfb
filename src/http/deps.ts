import type { Logger } from '../logger.js'
import type { RequestLimiter } from '../services/rate-limit.js'
import type { SandboxHealth } from '../sandbox/types.js'
import type { ServiceEventLog } from '../lifecycle/service-events.js'
import type {
  AgentRunsApi,
  CodeService,
  ExecService,
  PolicyView,
  ProcessService,
  ProviderView,
  SessionService,
  SessionStreamService,
  SnapshotService,
  ToolCallService,
} from '../services/index.js'
import type { AdminRoutesOptions } from './admin.js'
import type { E2BEndpointDeps } from './e2b/index.js'
import type { Keyring, Principal } from './keyring.js'

// The services' contracts live in src/services (import them from there); re-exported here for
// src/http/e2b, which imports them from this file.
export type {
  AgentRunView,
  AgentRunsApi,
  CodeService,
  ExecInput,
  ExecService,
  ForkResult,
  JobEvent,
  JobState,
  JobView,
  PolicyView,
  ProcessService,
  ProcessStartInput,
  ProviderView,
  RunCodeInput,
  SessionService,
  SessionView,
  SnapshotService,
  SnapshotView,
  ToolCallEvaluateOptions,
  ToolCallEvaluation,
  ToolCallService,
} from '../services/index.js'

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
  /**
   * The providers as `GET /v1/providers` shows them. `view.admin` (an admin key): fleet internals
   * such as each engine's worker gateway URLs are included; a tenant's key never sees them.
   */
  providers(view?: { admin: boolean }): Promise<ProviderView[]>
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
  /**
   * Admits each authenticated request of a tenant (`quotas.requestsPerSecond`): the fleet's bucket in
   * Redis for `sbx api`. Absent: a bucket of `limits.requestsPerSecond` in this process.
   */
  requestLimiter?: RequestLimiter
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
