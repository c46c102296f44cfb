import { createAgent } from '../../agent/agent.js'
import { BudgetInterceptor } from '../../agent/budget-interceptor.js'
import { shellTool } from '../../agent/define-tool.js'
import { processTools, type ProcessToolBackend } from '../../agent/process-tools.js'
import { codeTool, type CodeToolBackend } from '../../agent/code-tools.js'
import { finishReasonLabel } from '../../agent/finish-reason.js'
import type { ModelClient } from '../../agent/model-client.js'
import type { InterceptorChains } from '../../extensions/compose.js'
import { AppError } from '../../errors.js'
import type { RouteExecutor } from '../../routing/types.js'
import type { AgentRunRecord, AgentRunStore } from './types.js'

/** What executing a run needs. */
export interface AgentRunDeps {
  store: AgentRunStore
  chains: InterceptorChains
  router: RouteExecutor
  model: (name: string | undefined) => ModelClient
  /** Background processes of sessions: a run with a sessionId gets the process tools. */
  processes?: ProcessToolBackend
  /** The code interpreter of sessions: a run with a sessionId gets `run_code`. */
  code?: CodeToolBackend
  /** Observes finished runs (metrics). */
  onFinished?: (record: AgentRunRecord) => void
}

/**
 * Runs one stored agent run to its end: the agent loop with the server's interceptor chain, a
 * routed `bash` tool (and, in a session, the process tools), the run's budget; lifecycle events are appended to the run's event log.
 * Never throws: failures end the run `failed` (or `cancelled` when `signal` aborted).
 */
export async function executeAgentRun(id: string, deps: AgentRunDeps, signal: AbortSignal): Promise<void> {
  const record = await deps.store.get(id)
  if (!record) return
  if (record.state === 'running') {
    // Redelivered after the worker that ran it died: the loop's progress is lost; say so.
    await deps.store.update(id, {
      state: 'failed',
      error: { code: 'JOB_INTERRUPTED', message: 'the worker running this agent run died; submit it again' },
      finishedAt: Date.now(),
    })
    return
  }
  if (record.state !== 'queued') return
  await deps.store.update(id, { state: 'running' })
  const { request } = record
  try {
    const agent = createAgent({
      model: deps.model(request.model),
      tools: [
        shellTool(),
        ...(deps.processes && request.sessionId ? processTools({ backend: deps.processes }) : []),
        ...(deps.code && request.sessionId ? [codeTool({ backend: deps.code })] : []),
      ],
      toolInterceptors: deps.chains.toolCall,
      promptInterceptors: deps.chains.prompt,
      modelRequestInterceptors: deps.chains.modelRequest,
      lifecycleHooks: [
        ...deps.chains.lifecycleHooks,
        {
          name: 'agent-run-events',
          onEvent: (e) =>
            deps.store.appendEvent(id, {
              type: e.type,
              step: e.step,
              ...(e.message !== undefined ? { message: e.message } : {}),
              attributes: safeAttributes(e.attributes),
              timestamp: e.timestamp,
            }),
        },
      ],
      interceptors: request.budget?.maxTotalTokens
        ? [new BudgetInterceptor({ maxTotalTokens: request.budget.maxTotalTokens })]
        : [],
      router: deps.router,
      tenant: record.tenant,
      ...(request.maxIterations ? { maxIterations: request.maxIterations } : {}),
    })
    const result = await agent.run(request.input, {
      ...(request.sessionId ? { sessionId: request.sessionId } : {}),
      signal,
    })
    const patch: Partial<AgentRunRecord> = {
      state: result.finishReason.kind === 'error' ? 'failed' : 'completed',
      output: result.output,
      finishReason:
        result.finishReason.kind === 'custom'
          ? finishReasonLabel(result.finishReason)
          : result.finishReason.kind,
      usage: result.usage,
      sandboxSeconds: { ...result.sandboxSeconds },
      llmCalls: result.llmCalls.length,
      iterations: result.iterations,
      toolCalls: result.toolCalls.map((t) => ({
        name: t.name,
        callId: t.callId,
        routed: t.via === 'routed',
        ...(t.via === 'routed' && t.route
          ? { provider: t.exec?.route?.providerId ?? t.route.providerId }
          : {}),
        ...(t.outcome === 'ok' ? {} : { error: t.output.slice(0, 500) }),
      })),
      ...(result.finishReason.kind === 'error'
        ? { error: { code: result.finishReason.code ?? 'UNAVAILABLE', message: result.finishReason.message } }
        : {}),
      finishedAt: Date.now(),
    }
    await deps.store.update(id, patch)
  } catch (err) {
    const cancelled = signal.aborted
    const e = err instanceof AppError ? err : undefined
    await deps.store.update(id, {
      state: cancelled ? 'cancelled' : 'failed',
      error: cancelled
        ? { code: 'JOB_CANCELLED', message: 'the run was cancelled' }
        : {
            code: e?.code ?? 'INTERNAL',
            message: e?.message ?? (err instanceof Error ? err.message : String(err)),
          },
      finishedAt: Date.now(),
    })
  }
  const final = await deps.store.get(id)
  if (final) deps.onFinished?.(final)
}

/** Keeps attribute values that are plain scalars (route, tool name, severity…); drops objects that may hold user data. */
function safeAttributes(attrs: Readonly<Record<string, unknown>>): Record<string, unknown> {
  const out: Record<string, unknown> = {}
  for (const [k, v] of Object.entries(attrs)) {
    if (v === null || ['string', 'number', 'boolean'].includes(typeof v)) out[k] = v
    else if (k === 'route' && typeof v === 'object') out[k] = v
  }
  return out
}
