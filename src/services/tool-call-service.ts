import type { InterceptorChains } from '../extensions/compose.js'
import { AppError } from '../errors.js'
import type { JobState, ToolCallEvaluateOptions, ToolCallEvaluation, ToolCallService } from './index.js'
import type { ToolCallRequest } from '../interceptors/types.js'
import {
  JobInterruptedError,
  JobNotAcceptedError,
  JobOutcomeUnknownError,
  jobCancelledError,
} from '../routing/job-errors.js'
import { runToolCall } from '../routing/tool-call-pipeline.js'
import type { RouteExecutor } from '../routing/types.js'
import { ensureSessionRecord } from './session-directory.js'
import type { SessionDirectory } from './session-directory.js'

/**
 * Evaluates tool calls through the server's chain (host policy first, then extensions) with the one
 * tool-call pipeline (`runToolCall`), so `output` is the text the agent loop would give its model.
 * Routed calls run through the queue and come back after the after-chain; allowed calls are not
 * executed (the server has no local tools): the caller gets the verdict and runs the tool itself.
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
    opts: ToolCallEvaluateOptions,
  ): Promise<ToolCallEvaluation> {
    const ctx = {
      tenant,
      ...(opts.sessionId ? { sessionId: opts.sessionId } : {}),
      ...(opts.signal ? { signal: opts.signal } : {}),
    }
    let jobId: string | undefined
    const running = runToolCall(request, ctx, {
      interceptors: this.chains.toolCall,
      router: this.router,
      onAccepted: (id) => (jobId = id),
      ...(opts.timeoutMs === undefined ? {} : { routeTimeoutMs: () => opts.timeoutMs }),
      ...(opts.onStdout ? { onStdout: opts.onStdout } : {}),
      ...(opts.onStderr ? { onStderr: opts.onStderr } : {}),
      // Before the job: a session directory that cannot record the session (Redis away) fails the
      // request (503), rather than becoming a tool output.
      onEvent: async (e) => {
        if (e.type !== 'decided' || e.verdict.kind !== 'routeTo') return
        await ensureSessionRecord(this.directory, tenant, opts.sessionId, {
          provider: e.verdict.route.providerId,
          profile: e.verdict.route.profile,
        })
      },
    })
    // A client that disconnected mid-call gets no answer; its job was cancelled (409, not a 500 in the log).
    const r = await running.catch((err: unknown) => {
      if (opts.signal?.aborted) throw jobCancelledError('the client disconnected')
      throw err
    })
    // Nothing was accepted: the caller gets the 503 (with Retry-After), not a tool output to misread.
    if (r.error instanceof JobNotAcceptedError) throw r.error
    const { verdict } = r
    const decision: ToolCallEvaluation['decision'] =
      verdict.kind === 'allow'
        ? { kind: 'allow' }
        : verdict.kind === 'block'
          ? { kind: 'block', reason: verdict.reason, decidedBy: verdict.decidedBy }
          : {
              kind: 'routeTo',
              providerId: verdict.route.providerId,
              profile: verdict.route.profile,
              command: verdict.route.command,
              ...(verdict.route.run ? { run: { ...verdict.route.run } } : {}),
              decidedBy: verdict.decidedBy,
            }
    return {
      decision,
      request: verdict.request,
      ...(r.output === undefined ? {} : { output: r.output, outcome: r.outcome }),
      ...(r.exec ? { result: r.exec } : {}),
      ...(verdict.kind === 'routeTo' ? { blocked: r.afterBlocked } : {}),
      ...(jobId ? { job: { id: jobId, state: jobStateOf(r.error) } } : {}),
    }
  }
}

/** The state of an accepted routed call's job, from how the call ended. */
function jobStateOf(error: unknown): JobState {
  if (error === undefined) return 'completed'
  if (error instanceof JobOutcomeUnknownError) return 'unknown'
  if (error instanceof JobInterruptedError) return 'interrupted'
  if (error instanceof AppError && error.code === 'JOB_CANCELLED') return 'cancelled'
  return 'failed'
}
