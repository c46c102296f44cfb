import { createAgent } from '../../agent/agent.js'
import { BudgetInterceptor } from '../../agent/budget-interceptor.js'
import { shellTool } from '../../agent/define-tool.js'
import { processTools, type ProcessToolBackend } from '../../agent/process-tools.js'
import { codeTool, type CodeToolBackend } from '../../agent/code-tools.js'
import { finishReasonLabel } from '../../agent/finish-reason.js'
import type { ModelClient } from '../../agent/model-client.js'
import type { InterceptorChains } from '../../extensions/compose.js'
import { AppError } from '../../errors.js'
import { abortReasonOf } from '../../queue/run-job.js'
import { resultOfOutcome } from '../../queue/fence.js'
import type { JobResult } from '../../queue/schemas.js'
import type { FenceOutcome } from '../../queue/types.js'
import type { RouteExecutor } from '../../routing/types.js'
import type { AgentRunRecord, AgentRunStore } from './types.js'
import { isFinal } from './types.js'

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

/** What a redelivered run that had begun ends with (its loop's progress is lost). */
const INTERRUPTED = {
  code: 'JOB_INTERRUPTED',
  message: 'the worker running this agent run died; submit it again',
} as const

/**
 * Runs one stored agent run to its end: the agent loop with the server's interceptor chain, a
 * routed `bash` tool (and, in a session, the process tools), the run's budget; lifecycle events are
 * appended to the run's event log. `begin` is the job fence's (called right before the run starts:
 * a run whose earlier attempt began ends failed JOB_INTERRUPTED instead of running twice). Resolves
 * with the run's record as it ended (undefined when it has none). Failures end the run `failed` (or
 * `cancelled` when `signal` was aborted by a cancel); it rejects only when the record cannot be
 * written (Redis away) or when `signal` was aborted for shutdown (the run then ends failed
 * JOB_INTERRUPTED, and the queue hands its job back).
 */
export async function executeAgentRun(
  id: string,
  deps: AgentRunDeps,
  signal: AbortSignal,
  begin?: () => Promise<FenceOutcome<unknown>>,
): Promise<AgentRunRecord | undefined> {
  const record = await deps.store.get(id)
  if (!record) return undefined
  if (record.state === 'running') {
    // Redelivered after the worker that ran it died (and its fence did not say so): the loop's
    // progress is lost; say so.
    await deps.store.update(id, { state: 'failed', error: INTERRUPTED, finishedAt: Date.now() })
    return deps.store.get(id)
  }
  if (record.state !== 'queued') return record
  const verdict = await begin?.()
  const skipped = verdict && resultOfOutcome(verdict)
  if (skipped) {
    await endSkippedRun(deps.store, id, skipped)
    return deps.store.get(id)
  }
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
    const abort = abortReasonOf(signal)
    if (abort?.kind === 'shutdown') {
      // This worker is stopping past its drain deadline: the run cannot go on elsewhere.
      await deps.store.update(id, {
        state: 'failed',
        error: {
          code: 'JOB_INTERRUPTED',
          message: 'the worker running this agent run shut down before it finished; submit it again',
        },
        finishedAt: Date.now(),
      })
      throw err
    }
    const cancelled = abort !== undefined
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
  return final
}

/**
 * Ends a run's record the way its job ended without running it: a redelivery whose fence found the
 * run begun (`interrupted` → failed JOB_INTERRUPTED), a cancel request, or the queue giving up. A
 * record that is final already stays as it is.
 */
export async function endSkippedRun(store: AgentRunStore, id: string, result: JobResult): Promise<void> {
  const r = await store.get(id)
  if (!r || isFinal(r.state)) return
  const finishedAt = Date.now()
  switch (result.status) {
    case 'completed':
      // An earlier attempt finished the job: its record is its own (not final only if that write was lost).
      return
    case 'cancelled':
      return store.update(id, {
        state: 'cancelled',
        error: { code: 'JOB_CANCELLED', message: 'the run was cancelled' },
        finishedAt,
      })
    case 'interrupted':
      return store.update(id, { state: 'failed', error: INTERRUPTED, finishedAt })
    case 'failed':
      return store.update(id, {
        state: 'failed',
        error: { code: result.code, message: result.message },
        finishedAt,
      })
  }
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
