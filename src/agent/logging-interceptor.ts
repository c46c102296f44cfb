import type {
  AgentInterceptor,
  IterationContext,
  IterationResult,
  LlmCallContext,
  Next,
  ToolCallContext,
  ToolCallRecord,
} from './agent-interceptor.js'
import type { ToolCallRequest } from '../interceptors/types.js'
import { finishReasonLabel } from './finish-reason.js'
import type { ModelRequest, ModelResponse } from './model-client.js'

/** Log levels of {@link LoggingInterceptor}. */
export type LogLevel = 'debug' | 'info' | 'warn'

/** Where {@link LoggingInterceptor} writes; bridge it to pino, console or anything else. */
export type LogSink = (level: LogLevel, message: string) => void | Promise<void>

/**
 * Logs the loop through a sink, so core has no logging dependency: iterations at `debug`, model and
 * tool calls at `info`, failures at `warn` (then re-thrown). Never logs prompts, arguments or
 * outputs (they may carry user data). A sink that throws fails the run like any interceptor.
 *
 * @example new LoggingInterceptor((level, msg) => logger[level](msg))
 */
export class LoggingInterceptor implements AgentInterceptor {
  readonly name: string

  constructor(
    private readonly sink: LogSink,
    options: { name?: string } = {},
  ) {
    this.name = options.name ?? 'logging'
  }

  async aroundIteration(
    ctx: IterationContext,
    next: Next<IterationContext, IterationResult>,
  ): Promise<IterationResult> {
    const final = ctx.isLastIteration ? ' (final)' : ''
    await this.sink('debug', `iteration ${ctx.iteration}/${ctx.maxIterations} start${final}`)
    const r = await next()
    const end = r.kind === 'finish' ? `finish ${finishReasonLabel(r.finishReason)}` : 'continue'
    await this.sink('debug', `iteration ${ctx.iteration} end: ${end}`)
    return r
  }

  async aroundLlmCall(ctx: LlmCallContext, next: Next<ModelRequest, ModelResponse>): Promise<ModelResponse> {
    const req = ctx.request
    await this.sink(
      'info',
      `llm call model=${req.model} messages=${req.messages.length} tools=${req.tools.length}`,
    )
    let res: ModelResponse
    try {
      res = await next()
    } catch (err) {
      await this.sink(
        'warn',
        `llm call failed model=${req.model}: ${err instanceof Error ? err.message : String(err)}`,
      )
      throw err
    }
    const u = res.usage
    await this.sink(
      'info',
      `llm response model=${res.model ?? req.model} in=${u?.inputTokens ?? 0} out=${u?.outputTokens ?? 0} ` +
        `tool_calls=${res.toolCalls?.length ?? 0} finish=${res.finishReason ?? '-'}`,
    )
    return res
  }

  async aroundToolCall(
    ctx: ToolCallContext,
    next: Next<ToolCallRequest, ToolCallRecord>,
  ): Promise<ToolCallRecord> {
    const { name, callId } = ctx.call
    await this.sink('info', `tool ${name} (${callId}) start`)
    let rec: ToolCallRecord
    try {
      rec = await next()
    } catch (err) {
      await this.sink(
        'warn',
        `tool ${name} (${callId}) failed: ${err instanceof Error ? err.message : String(err)}`,
      )
      throw err
    }
    const route = rec.route ? ` route=${rec.route.providerId}/${rec.route.profile}` : ''
    await this.sink(
      rec.outcome === 'error' ? 'warn' : 'info',
      `tool ${rec.name} (${callId}) ${rec.outcome} via=${rec.via}${route} ${rec.durationMs} ms`,
    )
    return rec
  }
}
