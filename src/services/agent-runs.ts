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

/** Tokens a run's model calls used, summed over its calls. */
const AgentRunUsage = z.object({
  inputTokens: z.number(),
  outputTokens: z.number(),
  totalTokens: z.number(),
  cachedInputTokens: z.number(),
  cacheWriteInputTokens: z.number(),
  reasoningTokens: z.number(),
})

/** An agent run as the API shows it: the one schema of the view and its type. */
export const AgentRunView = z.object({
  id: z.string(),
  state: z.enum(['queued', 'running', 'completed', 'failed', 'cancelled']),
  request: AgentRunInput,
  output: z.string().optional(),
  finishReason: z.string().optional(),
  usage: AgentRunUsage.optional(),
  /** Sandbox time of the run's routed calls, in seconds per provider that ran them. */
  sandboxSeconds: z.record(z.string(), z.number()).optional(),
  llmCalls: z.number().optional(),
  iterations: z.number().optional(),
  toolCalls: z
    .array(
      z.object({
        name: z.string(),
        callId: z.string(),
        routed: z.boolean(),
        /** For a routed call: the provider that ran it (a routing policy's pick included). */
        provider: z.string().optional(),
        error: z.string().optional(),
      }),
    )
    .optional(),
  error: z.object({ code: z.string(), message: z.string() }).optional(),
  /** Set while queued when nothing will pick the run up (fleet: no agent-run worker connected). */
  warning: z.string().optional().meta({
    description: 'Set while queued when no agent-run worker is connected (`sbx worker --agent`)',
  }),
  createdAt: z.number(),
  finishedAt: z.number().optional(),
})
export type AgentRunView = z.infer<typeof AgentRunView>

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
