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
