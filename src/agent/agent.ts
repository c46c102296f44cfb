import type { AgentConfig } from './config.js'
import { resolveConfig } from './config.js'
import { AgentConfigError } from './errors.js'
import type { RunOptions } from './loop.js'
import { runLoop } from './loop.js'
import type { ToolSpec } from './model-client.js'
import type { CreateAgentOptions } from './options.js'
import type { AgentResult } from './result.js'
import type { AgentSession, OpenSessionOptions } from './session.js'
import { openSession } from './session.js'

/** An agent: a model, tools and interceptors, ready to run. Stateless between runs; see {@link AgentSession}. */
export interface Agent {
  /** The tool specs offered to the model (extension tools namespaced `plugin__<id>__<tool>`). */
  readonly tools: readonly ToolSpec[]
  /**
   * Runs the loop on `input`. Resolves with the result for every way a run can end, including a model
   * error (finishReason `error`); rejects with `InterceptorError` when a control interceptor throws,
   * and with the abort reason when `signal` aborts.
   */
  run(input: string, options?: RunOptions): Promise<AgentResult>
  /** Opens a conversation across runs (fires SESSION_START). */
  openSession(options?: OpenSessionOptions): Promise<AgentSession>
  /** Lifecycle-hook failures recorded so far (hooks never fail a run). */
  readonly hookFailures: readonly { hook: string; type: string; error: unknown }[]
}

/**
 * Creates an agent. Every option is validated here (fail fast with `AgentConfigError` /
 * `ExtensionError`): tool definitions, duplicate tool or interceptor names, limits.
 *
 * @example
 * const agent = createAgent({
 *   model: openAICompatible({ apiKey, model: 'gpt-4o-mini' }),
 *   tools: [shellTool()],
 *   toolInterceptors: [routeShellTools({ providerId: 'docker', profile: 'default' })],
 *   interceptors: [new BudgetInterceptor({ maxTotalTokens: 200_000 })],
 *   router,
 * })
 * const { output, finishReason, usage } = await agent.run('list the files in /work')
 */
export function createAgent(options: CreateAgentOptions): Agent {
  const cfg: AgentConfig = resolveConfig(options)
  if (cfg.router !== undefined && typeof cfg.router.execute !== 'function') {
    throw new AgentConfigError('router must be a RouteExecutor with execute(route, ctx)')
  }
  return {
    tools: cfg.toolSpecs,
    run: (input, runOptions) => {
      if (typeof input !== 'string') {
        return Promise.reject(
          new AgentConfigError(`agent.run needs the user input as a string, got ${typeof input}`),
        )
      }
      return runLoop(cfg, input, runOptions)
    },
    openSession: (sessionOptions) => openSession(cfg, sessionOptions),
    get hookFailures() {
      return cfg.dispatcher.failures
    },
  }
}
