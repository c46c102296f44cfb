import type { InterceptorChains } from '../extensions/compose.js'
import { AppError } from '../errors.js'
import type { JobState, ToolCallEvaluation, ToolCallService } from '../http/deps.js'
import { evaluateToolCall } from '../interceptors/chains.js'
import type { ToolCallRequest } from '../interceptors/types.js'
import { executeRoutedToolCall } from '../routing/execute-routed-tool-call.js'
import type { RoutedToolCallOutcome } from '../routing/execute-routed-tool-call.js'
import { JobInterruptedError, JobNotAcceptedError, JobOutcomeUnknownError } from '../routing/job-errors.js'
import type { RouteExecutor } from '../routing/types.js'
import { ensureSessionRecord } from './session-directory.js'
import type { SessionDirectory } from './session-directory.js'

/**
 * Evaluates tool calls through the server's chain (host policy first, then extensions). Routed
 * calls run through the queue and come back after the after-chain; allowed calls are not executed
 * (the server has no local tools): the caller gets the verdict and runs the tool itself.
 */
export class ChainToolCallService implements ToolCallService {
  constructor(
    private readonly chains: InterceptorChains,
    private readonly router: RouteExecutor,
    private readonly directory: SessionDirectory,
  ) {}

  async evaluate(
    tenant: string,
    request: ToolCallRequest,
    opts: { sessionId?: string; signal?: AbortSignal },
  ): Promise<ToolCallEvaluation> {
    const ctx = {
      tenant,
      ...(opts.sessionId ? { sessionId: opts.sessionId } : {}),
      ...(opts.signal ? { signal: opts.signal } : {}),
    }
    const verdict = await evaluateToolCall(this.chains.toolCall, request, ctx)
    switch (verdict.kind) {
      case 'allow':
        return { decision: { kind: 'allow' }, request: verdict.request }
      case 'block':
        return {
          decision: { kind: 'block', reason: verdict.reason, decidedBy: verdict.decidedBy },
          request: verdict.request,
        }
      case 'routeTo': {
        const { route } = verdict
        await ensureSessionRecord(this.directory, tenant, opts.sessionId, {
          provider: route.providerId,
          profile: route.profile,
        })
        const cwd = cwdOf(verdict.request.arguments)
        let jobId: string | undefined
        const outcome = await executeRoutedToolCall({
          executor: this.router,
          interceptors: this.chains.toolCall,
          request: verdict.request,
          route: {
            providerId: route.providerId,
            profile: route.profile,
            command: route.command,
            callId: request.callId,
            toolName: verdict.request.name,
            tenant,
            ...(opts.sessionId ? { sessionId: opts.sessionId } : {}),
            ...(cwd ? { cwd } : {}),
            shellDefault: 'persistent',
          },
          ctx: {
            ...(opts.signal ? { signal: opts.signal } : {}),
            onAccepted: (id) => (jobId = id),
          },
        })
        // Nothing was accepted: the caller gets the 503 (with Retry-After), not a tool output to misread.
        if (outcome.error instanceof JobNotAcceptedError) throw outcome.error
        return {
          decision: {
            kind: 'routeTo',
            providerId: route.providerId,
            profile: route.profile,
            command: route.command,
            decidedBy: verdict.decidedBy,
          },
          request: verdict.request,
          output: outcome.output,
          ...(outcome.result ? { result: outcome.result } : {}),
          blocked: outcome.blocked,
          ...(jobId ? { job: { id: jobId, state: jobStateOf(outcome) } } : {}),
        }
      }
    }
  }
}

/** A `cwd` argument of a shell call (pinned by forceWorkingDirectory), if any. */
function cwdOf(args: string): string | undefined {
  try {
    const v = (JSON.parse(args) as { cwd?: unknown }).cwd
    return typeof v === 'string' && v.startsWith('/') ? v : undefined
  } catch {
    return undefined
  }
}

/** The state of an accepted routed call's job, from how the call ended. */
function jobStateOf(outcome: RoutedToolCallOutcome): JobState {
  const { error } = outcome
  if (error === undefined) return 'completed'
  if (error instanceof JobOutcomeUnknownError) return 'unknown'
  if (error instanceof JobInterruptedError) return 'interrupted'
  if (error instanceof AppError && error.code === 'JOB_CANCELLED') return 'cancelled'
  return 'failed'
}
