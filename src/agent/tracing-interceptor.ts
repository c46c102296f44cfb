import type { Attributes, Context, Span, Tracer } from '@opentelemetry/api'
import { context, SpanKind, SpanStatusCode, trace } from '@opentelemetry/api'
import type { ToolCallRequest } from '../interceptors/types.js'
import type {
  AgentInterceptor,
  AgentRun,
  IterationContext,
  IterationResult,
  LlmCallContext,
  Next,
  ToolCallContext,
  ToolCallRecord,
} from './agent-interceptor.js'
import { finishReasonLabel } from './finish-reason.js'
import type { ModelRequest, ModelResponse } from './model-client.js'

/** Options of {@link TracingInterceptor}. */
export interface TracingInterceptorOptions {
  /** @default trace.getTracer('sandbox-router') (a no-op until an SDK is registered) */
  tracer?: Tracer
  /** @default 'tracing' */
  name?: string
}

/** Span names used by {@link TracingInterceptor}. */
export const AGENT_SPANS = {
  iteration: 'agent.iteration',
  llmCall: 'agent.llm_call',
  toolCall: 'agent.tool_call',
} as const

/**
 * Wraps iterations, model calls and tool calls in OpenTelemetry spans (`agent.iteration` →
 * `agent.llm_call` / `agent.tool_call`), with token usage (`gen_ai.usage.*`), model ids, tool names,
 * outcomes and the route of routed calls (`sandbox.route.provider_id`, `sandbox.route.profile`).
 * Never records prompts, arguments, commands or outputs. Child spans are parented explicitly, so
 * nesting holds even without a registered context manager.
 */
export class TracingInterceptor implements AgentInterceptor {
  readonly name: string
  private readonly tracer: Tracer
  private readonly iterationSpans = new WeakMap<AgentRun, Span>()

  constructor(options: TracingInterceptorOptions = {}) {
    this.tracer = options.tracer ?? trace.getTracer('sandbox-router')
    this.name = options.name ?? 'tracing'
  }

  async aroundIteration(
    ctx: IterationContext,
    next: Next<IterationContext, IterationResult>,
  ): Promise<IterationResult> {
    const attributes: Attributes = {
      'agent.run_id': ctx.run.runId,
      'agent.iteration': ctx.iteration,
      'agent.max_iterations': ctx.maxIterations,
      'agent.is_last_iteration': ctx.isLastIteration,
      ...(ctx.run.sessionId !== undefined ? { 'agent.session_id': ctx.run.sessionId } : {}),
      ...(ctx.forcedStop ? { 'agent.forced_stop': finishReasonLabel(ctx.forcedStop) } : {}),
    }
    const span = this.tracer.startSpan(AGENT_SPANS.iteration, { attributes }, context.active())
    this.iterationSpans.set(ctx.run, span)
    return this.within(span, context.active(), next, (r) => {
      span.setAttribute('agent.iteration.outcome', r.kind)
      if (r.kind === 'finish') span.setAttribute('agent.finish_reason', finishReasonLabel(r.finishReason))
    })
  }

  async aroundLlmCall(ctx: LlmCallContext, next: Next<ModelRequest, ModelResponse>): Promise<ModelResponse> {
    const req = ctx.request
    const parent = this.parentOf(ctx.run)
    const span = this.tracer.startSpan(
      AGENT_SPANS.llmCall,
      {
        kind: SpanKind.CLIENT,
        attributes: {
          'gen_ai.operation.name': 'chat',
          'gen_ai.request.model': req.model,
          'agent.iteration': ctx.iteration,
          'agent.tools_offered': req.tools.length,
          ...(req.maxOutputTokens !== undefined ? { 'gen_ai.request.max_tokens': req.maxOutputTokens } : {}),
          ...(req.temperature !== undefined ? { 'gen_ai.request.temperature': req.temperature } : {}),
        },
      },
      parent,
    )
    return this.within(span, parent, next, (res) => {
      const u = res.usage ?? {}
      span.setAttributes({
        'gen_ai.response.model': res.model ?? req.model,
        'gen_ai.usage.input_tokens': u.inputTokens ?? 0,
        'gen_ai.usage.output_tokens': u.outputTokens ?? 0,
        'agent.usage.total_tokens': u.totalTokens ?? (u.inputTokens ?? 0) + (u.outputTokens ?? 0),
        'agent.usage.cached_input_tokens': u.cachedInputTokens ?? 0,
        'agent.usage.cache_write_input_tokens': u.cacheWriteInputTokens ?? 0,
        'agent.usage.reasoning_tokens': u.reasoningTokens ?? 0,
        'agent.tool_calls': res.toolCalls?.length ?? 0,
        ...(res.finishReason ? { 'gen_ai.response.finish_reasons': [res.finishReason] } : {}),
      })
    })
  }

  async aroundToolCall(
    ctx: ToolCallContext,
    next: Next<ToolCallRequest, ToolCallRecord>,
  ): Promise<ToolCallRecord> {
    const parent = this.parentOf(ctx.run)
    const span = this.tracer.startSpan(
      AGENT_SPANS.toolCall,
      {
        attributes: {
          'gen_ai.operation.name': 'execute_tool',
          'gen_ai.tool.name': ctx.call.name,
          'gen_ai.tool.call.id': ctx.call.callId,
          'agent.iteration': ctx.iteration,
        },
      },
      parent,
    )
    return this.within(span, parent, next, (rec) => {
      span.setAttributes({
        'gen_ai.tool.name': rec.name,
        'agent.tool.outcome': rec.outcome,
        'agent.tool.via': rec.via,
        'agent.tool.duration_ms': rec.durationMs,
        ...(rec.decidedBy !== undefined ? { 'agent.tool.decided_by': rec.decidedBy } : {}),
        ...(rec.route
          ? { 'sandbox.route.provider_id': rec.route.providerId, 'sandbox.route.profile': rec.route.profile }
          : {}),
        ...(rec.exec
          ? {
              'sandbox.exec.timed_out': rec.exec.timedOut,
              'sandbox.exec.truncated': rec.exec.truncated,
              'sandbox.exec.duration_ms': rec.exec.durationMs,
              ...(rec.exec.exitCode !== null ? { 'sandbox.exec.exit_code': rec.exec.exitCode } : {}),
            }
          : {}),
      })
      if (rec.outcome === 'error')
        span.setStatus({ code: SpanStatusCode.ERROR, message: 'tool call ended in an error result' })
    })
  }

  private parentOf(run: AgentRun): Context {
    const span = this.iterationSpans.get(run)
    return span?.isRecording() ? trace.setSpan(context.active(), span) : context.active()
  }

  /** Runs `next` with `span` active, records the outcome or the exception, and ends the span. */
  private async within<T>(
    span: Span,
    parent: Context,
    next: () => Promise<T>,
    onResult: (r: T) => void,
  ): Promise<T> {
    // A non-recording span (no SDK, or sampled out) needs no context switch and no attributes.
    const recording = span.isRecording()
    try {
      const r = recording ? await context.with(trace.setSpan(parent, span), next) : await next()
      if (recording) onResult(r)
      return r
    } catch (err) {
      span.recordException(err instanceof Error ? err : String(err))
      span.setStatus({
        code: SpanStatusCode.ERROR,
        message: err instanceof Error ? err.message : String(err),
      })
      throw err
    } finally {
      span.end()
    }
  }
}
