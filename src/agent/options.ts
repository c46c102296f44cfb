import type { ExtensionRegistry } from '../extensions/registry.js'
import type {
  ModelRequestInterceptor,
  PromptInterceptor,
  ToolCallInterceptor,
} from '../interceptors/types.js'
import type { LifecycleHook } from '../lifecycle/events.js'
import type { RouteExecutor } from '../routing/types.js'
import type { AgentInterceptor } from './agent-interceptor.js'
import type { ModelClient } from './model-client.js'
import type { Tool } from './tool.js'

/** Options of {@link createAgent}. Validated once, at creation: a bad option throws `AgentConfigError`. */
export interface CreateAgentOptions {
  /** The chat model. */
  model: ModelClient
  /** Tools offered to the model (see `defineTool`, `shellTool`). Names must be unique. */
  tools?: readonly Tool[]
  systemPrompt?: string
  instructions?: string
  temperature?: number
  topP?: number
  maxOutputTokens?: number
  /** Host tool-call interceptors; they run before extension interceptors. */
  toolInterceptors?: readonly ToolCallInterceptor[]
  /** Host prompt interceptors; they run before extension interceptors. */
  promptInterceptors?: readonly PromptInterceptor[]
  /** Host model-request interceptors; their output feeds the first extension interceptor. */
  modelRequestInterceptors?: readonly ModelRequestInterceptor[]
  /** Enabled extensions contribute interceptors, tools (`plugin__<id>__<tool>`) and lifecycle hooks. Snapshotted at creation. */
  extensions?: ExtensionRegistry
  /** Loop middleware; the first is outermost. Names must be unique. */
  interceptors?: readonly AgentInterceptor[]
  /** Observers (record-and-continue). Host hooks run before extension hooks. */
  lifecycleHooks?: readonly LifecycleHook[]
  /** Executes routeTo verdicts. Without it a routed call ends in an error result (never local execution). */
  router?: RouteExecutor
  /** Model calls per run, the last one a forced tool-free final answer. @default 20 */
  maxIterations?: number
  /** Run the tool calls of one model response concurrently (results keep the model's order). @default true */
  parallelToolCalls?: boolean
  /** Upper bound of concurrent tool calls per response. @default 8 */
  maxParallelToolCalls?: number
  /** Timeout of a local tool execution (ms) unless the tool sets `timeoutMs`. @default 120000 */
  toolTimeoutMs?: number
  /** Tenant passed to interceptors and routed calls (service mode). */
  tenant?: string
  /** Runtime label of lifecycle events. @default 'agent' */
  runtime?: string
  /** User message injected on the last iteration when `maxIterations` is reached. */
  maxIterationsInstruction?: string
}

/** Defaults of {@link CreateAgentOptions}. */
export const AGENT_DEFAULTS = {
  maxIterations: 20,
  parallelToolCalls: true,
  maxParallelToolCalls: 8,
  toolTimeoutMs: 120_000,
  runtime: 'agent',
  maxIterationsInstruction:
    'You have reached the maximum number of steps for this task. Do not call tools. Provide your best final answer now, based on what you have so far.',
} as const
