import type {
  Attributes,
  AttributeValue,
  Context,
  Span,
  SpanContext,
  SpanOptions,
  SpanStatus,
  Tracer,
} from '@opentelemetry/api'
import { SpanStatusCode, trace } from '@opentelemetry/api'
import { describe, expect, it } from 'vitest'
import type { LogLevel } from '../../../src/agent/index.js'
import {
  AGENT_SPANS,
  createAgent,
  LoggingInterceptor,
  scriptedModel,
  scriptedToolCall,
  shellTool,
  TracingInterceptor,
} from '../../../src/agent/index.js'
import { InterceptorError, ToolCallDecision } from '../../../src/interceptors/index.js'
import { execResult, TestRouter } from '../../support/agent-doubles.js'

/** A span that keeps what the interceptor set (an implementation of the API interface, not a stub of a service). */
class RecordedSpan implements Span {
  attributes: Attributes = {}
  status: SpanStatus = { code: SpanStatusCode.UNSET }
  ended = false
  exceptions: unknown[] = []
  private readonly ctx: SpanContext
  constructor(
    readonly name: string,
    readonly parent: RecordedSpan | undefined,
    options: SpanOptions | undefined,
    id: number,
  ) {
    this.attributes = { ...(options?.attributes ?? {}) }
    this.ctx = {
      traceId: '0af7651916cd43dd8448eb211c80319c',
      spanId: id.toString(16).padStart(16, '0'),
      traceFlags: 1,
    }
  }
  spanContext(): SpanContext {
    return this.ctx
  }
  setAttribute(key: string, value: AttributeValue): this {
    this.attributes[key] = value
    return this
  }
  setAttributes(attributes: Attributes): this {
    Object.assign(this.attributes, attributes)
    return this
  }
  addEvent(): this {
    return this
  }
  addLink(): this {
    return this
  }
  addLinks(): this {
    return this
  }
  setStatus(status: SpanStatus): this {
    this.status = status
    return this
  }
  updateName(): this {
    return this
  }
  end(): void {
    this.ended = true
  }
  isRecording(): boolean {
    return !this.ended
  }
  recordException(exception: unknown): void {
    this.exceptions.push(exception)
  }
}

class RecordingTracer implements Tracer {
  readonly spans: RecordedSpan[] = []
  startSpan(name: string, options?: SpanOptions, context?: Context): Span {
    const parent = context ? trace.getSpan(context) : undefined
    const span = new RecordedSpan(
      name,
      parent instanceof RecordedSpan ? parent : undefined,
      options,
      this.spans.length + 1,
    )
    this.spans.push(span)
    return span
  }
  startActiveSpan(): never {
    throw new Error('not used by TracingInterceptor')
  }
}

const routeBash = {
  name: 'route-bash',
  beforeToolCall: () => ToolCallDecision.routeTo('docker', 'default', 'ls'),
}

describe('LoggingInterceptor', () => {
  it('logs iterations at debug, model and tool calls at info, through the sink', async () => {
    const lines: [LogLevel, string][] = []
    const model = scriptedModel([
      {
        toolCalls: [scriptedToolCall('bash', { command: 'ls' }, 'b1')],
        usage: { inputTokens: 7, outputTokens: 3 },
      },
      { text: 'done', finishReason: 'stop' },
    ])
    await createAgent({
      model,
      tools: [shellTool()],
      toolInterceptors: [routeBash],
      router: new TestRouter(() => execResult()),
      interceptors: [new LoggingInterceptor((level, msg) => void lines.push([level, msg]))],
    }).run('q')
    expect(lines.map(([l, m]) => `${l} ${m.replace(/[\d.]+ ms$/, 'N ms')}`)).toEqual([
      'debug iteration 1/20 start',
      'info llm call model=scripted messages=1 tools=1',
      'info llm response model=scripted in=7 out=3 tool_calls=1 finish=-',
      'info tool bash (b1) start',
      'info tool bash (b1) ok via=routed route=docker/default N ms',
      'debug iteration 1 end: continue',
      'debug iteration 2/20 start',
      'info llm call model=scripted messages=3 tools=1',
      'info llm response model=scripted in=0 out=0 tool_calls=0 finish=stop',
      'debug iteration 2 end: finish natural_stop',
    ])
  })

  it('logs a failed model call at warn and re-throws it (the run ends with finishReason error)', async () => {
    const lines: string[] = []
    const r = await createAgent({
      model: scriptedModel([new Error('boom')]),
      interceptors: [new LoggingInterceptor((level, msg) => void lines.push(`${level} ${msg}`))],
    }).run('q')
    expect(lines).toContain('warn llm call failed model=scripted: model call failed: boom')
    expect(r.finishReason.kind).toBe('error')
  })

  it('a sink that throws fails the run like any interceptor', async () => {
    const err = await createAgent({
      model: scriptedModel(['x']),
      interceptors: [
        new LoggingInterceptor(() => {
          throw new Error('disk full')
        }),
      ],
    })
      .run('q')
      .catch((e: unknown) => e)
    expect(err).toBeInstanceOf(InterceptorError)
    expect(err).toMatchObject({ interceptor: 'logging', stage: 'aroundIteration' })
  })
})

describe('TracingInterceptor', () => {
  it('opens iteration, model-call and tool-call spans with token and route attributes', async () => {
    const tracer = new RecordingTracer()
    const model = scriptedModel([
      {
        toolCalls: [scriptedToolCall('bash', { command: 'ls' }, 'b1')],
        model: 'gpt-x-2025',
        usage: { inputTokens: 100, outputTokens: 20, cachedInputTokens: 60 },
        finishReason: 'tool_calls',
      },
      'done',
    ])
    await createAgent({
      model,
      tools: [shellTool()],
      toolInterceptors: [routeBash],
      router: new TestRouter(() => execResult({ exitCode: 3 })),
      interceptors: [new TracingInterceptor({ tracer })],
    }).run('q', { sessionId: 'S' })
    expect(tracer.spans.map((s) => `${s.name}<${s.parent?.name ?? '-'}`)).toEqual([
      `${AGENT_SPANS.iteration}<-`,
      `${AGENT_SPANS.llmCall}<${AGENT_SPANS.iteration}`,
      `${AGENT_SPANS.toolCall}<${AGENT_SPANS.iteration}`,
      `${AGENT_SPANS.iteration}<-`,
      `${AGENT_SPANS.llmCall}<${AGENT_SPANS.iteration}`,
    ])
    expect(tracer.spans[1]?.parent).toBe(tracer.spans[0])
    expect(tracer.spans.every((s) => s.ended)).toBe(true)
    expect(tracer.spans[0]?.attributes).toMatchObject({
      'agent.iteration': 1,
      'agent.session_id': 'S',
      'agent.iteration.outcome': 'continue',
    })
    expect(tracer.spans[1]?.attributes).toMatchObject({
      'gen_ai.request.model': 'scripted',
      'gen_ai.response.model': 'gpt-x-2025',
      'gen_ai.usage.input_tokens': 100,
      'gen_ai.usage.output_tokens': 20,
      'agent.usage.cached_input_tokens': 60,
      'gen_ai.response.finish_reasons': ['tool_calls'],
    })
    expect(tracer.spans[2]?.attributes).toMatchObject({
      'gen_ai.tool.name': 'bash',
      'gen_ai.tool.call.id': 'b1',
      'agent.tool.outcome': 'ok',
      'agent.tool.via': 'routed',
      'sandbox.route.provider_id': 'docker',
      'sandbox.route.profile': 'default',
      'sandbox.exec.exit_code': 3,
    })
    expect(tracer.spans[3]?.attributes).toMatchObject({ 'agent.finish_reason': 'natural_stop' })
  })

  it('marks a failed model call span as an error and ends it', async () => {
    const tracer = new RecordingTracer()
    await createAgent({
      model: scriptedModel([new Error('503')]),
      interceptors: [new TracingInterceptor({ tracer })],
    }).run('q')
    const llm = tracer.spans.find((s) => s.name === AGENT_SPANS.llmCall)
    expect(llm?.status.code).toBe(SpanStatusCode.ERROR)
    expect(llm?.exceptions).toHaveLength(1)
    expect(llm?.ended).toBe(true)
  })

  it('works with the default (no-op) global tracer', async () => {
    const r = await createAgent({
      model: scriptedModel(['ok']),
      interceptors: [new TracingInterceptor()],
    }).run('q')
    expect(r.output).toBe('ok')
  })
})
