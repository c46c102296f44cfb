import type { InterceptorChains } from '../extensions/compose.js'
import { composeInterceptors } from '../extensions/compose.js'
import type { ModelRequestView, ToolCallRequest } from '../interceptors/types.js'
import { LifecycleDispatcher } from '../lifecycle/dispatcher.js'
import type { RouteExecutor } from '../routing/types.js'
import type {
  AgentInterceptor,
  IterationContext,
  IterationResult,
  LlmCallContext,
  ToolCallContext,
  ToolCallRecord,
} from './agent-interceptor.js'
import type { CompiledTool } from './define-tool.js'
import { compileTool } from './define-tool.js'
import { AgentConfigError } from './errors.js'
import type { ModelClient, ModelRequest, ModelResponse, ToolSpec } from './model-client.js'
import type { Layer } from './onion.js'
import type { CreateAgentOptions } from './options.js'
import { AGENT_DEFAULTS } from './options.js'

/** An agent interceptor and the name errors give it. */
export interface NamedAgentInterceptor {
  readonly ic: AgentInterceptor
  readonly name: string
}

/** Everything the loop needs, resolved and validated once by `createAgent`. */
export interface AgentConfig {
  readonly model: ModelClient
  readonly base: ModelRequestView
  readonly tools: ReadonlyMap<string, CompiledTool>
  readonly toolSpecs: readonly ToolSpec[]
  readonly chains: InterceptorChains
  readonly dispatcher: LifecycleDispatcher
  readonly interceptors: readonly AgentInterceptor[]
  /** Interceptors with `decide`, each with its name in errors (its own, else `agent interceptor #<n>`). */
  readonly deciders: readonly NamedAgentInterceptor[]
  readonly iterationLayers: readonly Layer<IterationContext, IterationContext, IterationResult>[]
  readonly llmLayers: readonly Layer<ModelRequest, LlmCallContext, ModelResponse>[]
  readonly toolLayers: readonly Layer<ToolCallRequest, ToolCallContext, ToolCallRecord>[]
  readonly hasAfterToolCall: boolean
  readonly router: RouteExecutor | undefined
  readonly maxIterations: number
  readonly toolConcurrency: number
  readonly toolTimeoutMs: number
  readonly tenant: string | undefined
  readonly runtime: string
  readonly maxIterationsInstruction: string
}

/** Validates options and precomputes chains, tool specs and onion layers. Throws {@link AgentConfigError}. */
export function resolveConfig(options: CreateAgentOptions): AgentConfig {
  if (!options || typeof options.model?.generate !== 'function') {
    throw new AgentConfigError('createAgent needs { model }: a ModelClient with generate(request, signal)')
  }
  const maxIterations = positiveInt('maxIterations', options.maxIterations ?? AGENT_DEFAULTS.maxIterations)
  const maxParallel = positiveInt(
    'maxParallelToolCalls',
    options.maxParallelToolCalls ?? AGENT_DEFAULTS.maxParallelToolCalls,
  )
  const toolTimeoutMs = positiveInt('toolTimeoutMs', options.toolTimeoutMs ?? AGENT_DEFAULTS.toolTimeoutMs)
  const modelId = options.model.model
  if (typeof modelId !== 'string' || modelId.length === 0) {
    throw new AgentConfigError(
      'the model client has no default model id (ModelClient.model); set one on the client',
    )
  }
  const snapshot = options.extensions?.snapshot()
  const chains = composeInterceptors(
    {
      toolCall: options.toolInterceptors ?? [],
      prompt: options.promptInterceptors ?? [],
      modelRequest: options.modelRequestInterceptors ?? [],
      lifecycleHooks: options.lifecycleHooks ?? [],
    },
    snapshot,
  )
  const tools = new Map<string, CompiledTool>()
  for (const tool of [...(options.tools ?? []), ...(snapshot?.tools ?? [])]) {
    const compiled = compileTool(tool)
    if (tools.has(compiled.tool.name)) {
      throw new AgentConfigError(
        `duplicate tool name "${compiled.tool.name}": every tool offered to the model needs a unique name`,
      )
    }
    tools.set(compiled.tool.name, compiled)
  }
  const interceptors = [...(options.interceptors ?? [])]
  // Each interceptor's name in errors: its own, else its position (the seed's interceptors are anonymous).
  const labels: string[] = []
  const seen = new Set<string>()
  interceptors.forEach((ic, i) => {
    if (!ic || typeof ic !== 'object')
      throw new AgentConfigError(
        `agent interceptor #${i + 1} is not an object with aroundIteration/aroundLlmCall/aroundToolCall/decide`,
      )
    if (ic.name !== undefined && (typeof ic.name !== 'string' || ic.name.length === 0))
      throw new AgentConfigError(`agent interceptor #${i + 1}: name must be a non-empty string, or left out`)
    const label = ic.name ?? `agent interceptor #${i + 1}`
    if (seen.has(label))
      throw new AgentConfigError(`duplicate agent interceptor name: ${label}; give each a unique name`)
    seen.add(label)
    labels.push(label)
  })
  const named = interceptors.map((ic, i) => ({ ic, name: labels[i] ?? '' }))
  return {
    model: options.model,
    base: baseView(modelId, options),
    tools,
    toolSpecs: [...tools.values()].map((t) => t.spec),
    chains,
    dispatcher: new LifecycleDispatcher(chains.lifecycleHooks),
    interceptors,
    deciders: named.filter(({ ic }) => typeof ic.decide === 'function'),
    iterationLayers: named.flatMap(({ ic, name }) =>
      ic.aroundIteration ? [{ name, call: ic.aroundIteration.bind(ic) }] : [],
    ),
    llmLayers: named.flatMap(({ ic, name }) =>
      ic.aroundLlmCall ? [{ name, call: ic.aroundLlmCall.bind(ic) }] : [],
    ),
    toolLayers: named.flatMap(({ ic, name }) =>
      ic.aroundToolCall ? [{ name, call: ic.aroundToolCall.bind(ic) }] : [],
    ),
    hasAfterToolCall: chains.toolCall.some((ic) => typeof ic.afterToolCall === 'function'),
    router: options.router,
    maxIterations,
    toolConcurrency: (options.parallelToolCalls ?? AGENT_DEFAULTS.parallelToolCalls) ? maxParallel : 1,
    toolTimeoutMs,
    tenant: options.tenant,
    runtime: options.runtime ?? AGENT_DEFAULTS.runtime,
    maxIterationsInstruction: options.maxIterationsInstruction ?? AGENT_DEFAULTS.maxIterationsInstruction,
  }
}

function positiveInt(name: string, value: number): number {
  if (!Number.isInteger(value) || value < 1) {
    throw new AgentConfigError(`${name} must be a positive integer, got ${String(value)}`)
  }
  return value
}

/** The request fields from options, with absent ones left out (built by assignment: a fast-mode object). */
function baseView(model: string, o: CreateAgentOptions): ModelRequestView {
  const v: { -readonly [K in keyof ModelRequestView]: ModelRequestView[K] } = { model }
  if (o.systemPrompt !== undefined) v.systemPrompt = o.systemPrompt
  if (o.instructions !== undefined) v.instructions = o.instructions
  if (o.temperature !== undefined) v.temperature = o.temperature
  if (o.topP !== undefined) v.topP = o.topP
  if (o.maxOutputTokens !== undefined) v.maxOutputTokens = o.maxOutputTokens
  return v
}
