import { z } from 'zod'
import { SessionId } from './common.js'

/** What `POST /v1/agent-runs` submits: one agent run's request. */
export const AgentRunInput = z
  .object({
    input: z
      .string()
      .min(1)
      .max(200_000)
      .meta({ example: 'List the files in the workspace and summarise them.' }),
    sessionId: SessionId.optional(),
    model: z.string().min(1).optional(),
    maxIterations: z.number().int().positive().max(200).optional(),
    budget: z.object({ maxTotalTokens: z.number().int().positive().optional() }).strict().optional(),
  })
  .strict()
export type AgentRunInput = z.infer<typeof AgentRunInput>

/** An agent run as the API shows it. */
export interface AgentRunView {
  id: string
  state: 'queued' | 'running' | 'completed' | 'failed' | 'cancelled'
  request: AgentRunInput
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
  submit(tenant: string, input: AgentRunInput): Promise<AgentRunView>
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
