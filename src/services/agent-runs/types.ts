import type { Usage } from '../../agent/model-client.js'

/** What `POST /v1/agent-runs` takes. */
export interface AgentRunInput {
  input: string
  /** Sandbox session of the run's shell calls (files persist across runs of one session). */
  sessionId?: string
  /** Name of a model in config `models`. @default the one named `default`, else the only one */
  model?: string
  maxIterations?: number
  budget?: { maxTotalTokens?: number }
}

/** Where a run is. */
export type AgentRunState = 'queued' | 'running' | 'completed' | 'failed' | 'cancelled'

/** A run as stored and shown (tenant-scoped). */
export interface AgentRunRecord {
  id: string
  tenant: string
  state: AgentRunState
  request: AgentRunInput
  output?: string
  /** `natural_stop`, `max_iterations`, `token_limit`, `error`, `prompt_blocked`, `budget_exceeded`, `custom:<reason>`. */
  finishReason?: string
  usage?: Usage
  /** Sandbox time of the run's routed calls, in seconds per provider that ran them. */
  sandboxSeconds?: Record<string, number>
  llmCalls?: number
  iterations?: number
  /** `provider`: for a routed call, the provider that ran it (a routing policy's pick included). */
  toolCalls?: { name: string; callId: string; routed: boolean; provider?: string; error?: string }[]
  error?: { code: string; message: string }
  /** Shown while `queued` when nothing will pick the run up (fleet: no agent-run worker connected); never stored. */
  warning?: string
  createdAt: number
  finishedAt?: number
}

/** One lifecycle event of a run, as streamed (payloads are not included: they may hold user data). */
export interface AgentRunEvent {
  seq: number
  type: string
  step: number
  message?: string
  attributes?: Record<string, unknown>
  timestamp: number
}

/**
 * Records and events of agent runs: in memory (embedded) or in Redis (fleet). Cancel requests go
 * through the agent-run job queue (`sbx-agent-runs`), as exec jobs' do.
 */
export interface AgentRunStore {
  create(record: AgentRunRecord): Promise<void>
  get(id: string): Promise<AgentRunRecord | undefined>
  update(id: string, patch: Partial<AgentRunRecord>): Promise<void>
  appendEvent(id: string, event: Omit<AgentRunEvent, 'seq'>): Promise<void>
  /** Events from `fromSeq` (inclusive). */
  events(id: string, fromSeq: number): Promise<AgentRunEvent[]>
  /** Called on every new event and on every state change of the run. */
  subscribe(id: string, listener: () => void): Promise<() => Promise<void>>
  close(): Promise<void>
}

/** Whether a run state is final. */
export function isFinal(state: AgentRunState): boolean {
  return state === 'completed' || state === 'failed' || state === 'cancelled'
}
