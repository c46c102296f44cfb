import type { Sandbox as BackendSandbox } from '../../../src/sandbox/types.js'

/**
 * The states a fake sandbox passes through, as Daytona names them: `creating` (or `pending_build`
 * first, for an image) → `started`; `stopping` → `stopped` → `archiving` → `archived`; `starting`
 * (`restoring` from `archived`) → `started`; `destroying` → `destroyed`; `error` for a failed start.
 */
export type FakeState =
  | 'pending_build'
  | 'creating'
  | 'starting'
  | 'restoring'
  | 'started'
  | 'stopping'
  | 'stopped'
  | 'archiving'
  | 'archived'
  | 'destroying'
  | 'destroyed'
  | 'error'

/** What the fake keeps per sandbox (the parts of Daytona's Sandbox DTO the SDK reads). */
export interface FakeSandboxRecord {
  id: string
  name: string
  labels: Record<string, string>
  env: Record<string, string>
  state: FakeState
  /** Every state the sandbox was in, oldest first (for assertions on transitions). */
  history: FakeState[]
  /** Why the sandbox is in the `error` state. */
  errorReason?: string
  cpu: number
  memory: number
  disk: number
  target: string
  public: boolean
  networkBlockAll: boolean
  /** Comma-separated CIDRs the sandbox may reach (absent: all, unless `networkBlockAll`). */
  networkAllowList?: string
  /** Minutes without activity before Daytona stops the sandbox (0: never). */
  autoStopInterval: number
  /** Minutes without activity before Daytona archives a stopped sandbox (0 at create: the maximum). */
  autoArchiveInterval: number
  /** Minutes without activity before Daytona deletes a stopped sandbox (negative: never; 0: at the stop). */
  autoDeleteInterval: number
  /** Minutes from creation after which Daytona destroys the sandbox in any state (absent or 0: none). */
  ttlMinutes?: number
  /** The snapshot the client asked for, if any. */
  snapshot?: string
  /** The image named by the client's `FROM` line, if it sent one. */
  image?: string
  createdAt: string
  updatedAt: string
  /** Last toolbox, preview, create or start request (ms since the epoch): what auto-stop counts from. */
  lastActivityAt: number
  /** Toolbox requests in progress (an open request counts as activity, as the proxy keeps re-posting it). */
  openRequests: number
  /** The Docker container that stands in for the sandbox (absent before it started and once destroyed). */
  backend?: BackendSandbox
}

/** Where a state is heading (Daytona's `desiredState`). */
function desiredState(state: FakeState): string {
  switch (state) {
    case 'stopping':
    case 'stopped':
      return 'stopped'
    case 'archiving':
    case 'archived':
      return 'archived'
    case 'destroying':
    case 'destroyed':
      return 'destroyed'
    case 'pending_build':
    case 'creating':
    case 'starting':
    case 'restoring':
    case 'started':
    case 'error':
      return 'started'
  }
}

/** The Sandbox DTO of a record, as `GET /sandbox/{id}` returns it. */
export function toDto(
  record: FakeSandboxRecord,
  toolboxProxyUrl: string,
  minuteMs: number,
): Record<string, unknown> {
  const ttl = record.ttlMinutes ?? 0
  return {
    id: record.id,
    organizationId: 'fake-organization',
    name: record.name,
    ...(record.snapshot ? { snapshot: record.snapshot } : {}),
    user: 'daytona',
    env: record.env,
    labels: record.labels,
    public: record.public,
    networkBlockAll: record.networkBlockAll,
    ...(record.networkAllowList !== undefined ? { networkAllowList: record.networkAllowList } : {}),
    target: record.target,
    cpu: record.cpu,
    gpu: 0,
    memory: record.memory,
    disk: record.disk,
    state: record.state,
    desiredState: desiredState(record.state),
    ...(record.errorReason ? { errorReason: record.errorReason } : {}),
    autoStopInterval: record.autoStopInterval,
    autoArchiveInterval: record.autoArchiveInterval,
    autoDeleteInterval: record.autoDeleteInterval,
    ...(ttl > 0
      ? { autoDestroyAt: new Date(Date.parse(record.createdAt) + ttl * minuteMs).toISOString() }
      : {}),
    createdAt: record.createdAt,
    updatedAt: record.updatedAt,
    lastActivityAt: new Date(record.lastActivityAt).toISOString(),
    daemonVersion: 'fake',
    sandboxClass: 'container',
    toolboxProxyUrl,
  }
}
