import type { AgentInterceptor } from '../../src/agent/index.js'
import type { LifecycleEvent, LifecycleHook } from '../../src/lifecycle/index.js'
import type { RouteContext, RouteExecutor, RouteRequest } from '../../src/routing/types.js'
import type { ExecResult } from '../../src/sandbox/types.js'

/** A lifecycle hook that keeps every event it sees. */
export function recordingHook(name = 'recorder'): { hook: LifecycleHook; events: LifecycleEvent[] } {
  const events: LifecycleEvent[] = []
  return { hook: { name, onEvent: (e) => void events.push(e) }, events }
}

/** An ExecResult as a sandbox would report it. */
export function execResult(partial: Partial<ExecResult> = {}): ExecResult {
  return {
    exitCode: 0,
    stdout: '',
    stderr: '',
    timedOut: false,
    truncated: false,
    durationMs: 3,
    sandboxId: 'sbx-1',
    ...partial,
  }
}

/** A tiny RouteExecutor: the interface under test, answering with results the test constructs. */
export class TestRouter implements RouteExecutor {
  readonly requests: RouteRequest[] = []
  readonly contexts: (RouteContext | undefined)[] = []
  constructor(private readonly respond: (route: RouteRequest) => ExecResult | Promise<ExecResult>) {}
  async execute(route: RouteRequest, ctx?: RouteContext): Promise<ExecResult> {
    this.requests.push(route)
    this.contexts.push(ctx)
    return this.respond(route)
  }
}

/** An agent interceptor that logs `<name>:<stage>:in` / `:out` around every stage into `log`. */
export function tracer(name: string, log: string[]): AgentInterceptor {
  return {
    name,
    async aroundIteration(_ctx, next) {
      log.push(`${name}:iteration:in`)
      const r = await next()
      log.push(`${name}:iteration:out`)
      return r
    },
    async aroundLlmCall(_ctx, next) {
      log.push(`${name}:llm:in`)
      const r = await next()
      log.push(`${name}:llm:out`)
      return r
    },
    async aroundToolCall(_ctx, next) {
      log.push(`${name}:tool:in`)
      const r = await next()
      log.push(`${name}:tool:out`)
      return r
    },
  }
}

/** Resolves after `ms` on a timer (used to make tool calls finish out of order, not to wait for state). */
export function delay(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms))
}
