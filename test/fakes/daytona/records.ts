import type { Sandbox as BackendSandbox } from '../../../src/sandbox/types.js'

/** What the fake keeps per sandbox (the parts of Daytona's Sandbox DTO the SDK reads). */
export interface FakeSandboxRecord {
  id: string
  name: string
  labels: Record<string, string>
  env: Record<string, string>
  state: 'started' | 'stopped' | 'error' | 'destroyed'
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
  autoStopInterval: number
  autoArchiveInterval: number
  autoDeleteInterval: number
  /** As sent by the client (not part of Daytona's DTO; kept for assertions). */
  ttlMinutes?: number
  /** The snapshot the client asked for, if any. */
  snapshot?: string
  /** The image named by the client's `FROM` line, if it sent one. */
  image?: string
  createdAt: string
  updatedAt: string
  /** The Docker container that stands in for the sandbox (absent once destroyed). */
  backend?: BackendSandbox
}

/** The Sandbox DTO of a record, as `GET /sandbox/{id}` returns it. */
export function toDto(record: FakeSandboxRecord, toolboxProxyUrl: string): Record<string, unknown> {
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
    desiredState: record.state === 'error' ? 'started' : record.state,
    ...(record.errorReason ? { errorReason: record.errorReason } : {}),
    autoStopInterval: record.autoStopInterval,
    autoArchiveInterval: record.autoArchiveInterval,
    autoDeleteInterval: record.autoDeleteInterval,
    createdAt: record.createdAt,
    updatedAt: record.updatedAt,
    lastActivityAt: record.updatedAt,
    daemonVersion: 'fake',
    sandboxClass: 'container',
    toolboxProxyUrl,
  }
}
