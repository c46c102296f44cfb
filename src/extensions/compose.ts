import { ToolCallDecision } from '../interceptors/decisions.js'
import type {
  ModelRequestInterceptor,
  PromptInterceptor,
  ToolCallInterceptor,
} from '../interceptors/types.js'
import type { LifecycleHook } from '../lifecycle/events.js'
import type { ExtensionGuardrail } from './context.js'
import type { ExtensionSnapshot } from './registry.js'
import { assertUniqueNames } from './unique.js'

/** The host's own interceptors (registered on the agent or server, not by extensions). */
export interface HostInterceptors {
  toolCall?: readonly ToolCallInterceptor[]
  prompt?: readonly PromptInterceptor[]
  modelRequest?: readonly ModelRequestInterceptor[]
  lifecycleHooks?: readonly LifecycleHook[]
}

/** The three effective chains plus the hooks, in evaluation order. */
export interface InterceptorChains {
  readonly toolCall: readonly ToolCallInterceptor[]
  readonly prompt: readonly PromptInterceptor[]
  readonly modelRequest: readonly ModelRequestInterceptor[]
  readonly lifecycleHooks: readonly LifecycleHook[]
}

/**
 * Composes host and extension interceptors with the one chaining rule: host interceptors first, then
 * extension guardrails, then extension interceptors in registration order. Names must be unique per
 * chain across host and extensions (`duplicate <kind> interceptor id: <name>`).
 */
export function composeInterceptors(
  host: HostInterceptors = {},
  extensions?: ExtensionSnapshot,
): InterceptorChains {
  const chains: InterceptorChains = {
    toolCall: [
      ...(host.toolCall ?? []),
      ...(extensions?.guardrails ?? []).map(guardrailInterceptor),
      ...(extensions?.toolCallInterceptors ?? []),
    ],
    prompt: [...(host.prompt ?? []), ...(extensions?.promptInterceptors ?? [])],
    modelRequest: [...(host.modelRequest ?? []), ...(extensions?.modelRequestInterceptors ?? [])],
    lifecycleHooks: [...(host.lifecycleHooks ?? []), ...(extensions?.lifecycleHooks ?? [])],
  }
  assertUniqueNames('tool-call', chains.toolCall)
  assertUniqueNames('prompt', chains.prompt)
  assertUniqueNames('model-request', chains.modelRequest)
  return chains
}

/** Adapts an allow/deny guardrail into a tool-call interceptor named `guardrail:<name>`. */
export function guardrailInterceptor(guardrail: ExtensionGuardrail): ToolCallInterceptor {
  return {
    name: `guardrail:${guardrail.name}`,
    async beforeToolCall(request, ctx) {
      const verdict = await guardrail.check(request, ctx)
      return verdict.allow ? ToolCallDecision.allow() : ToolCallDecision.block(verdict.reason)
    },
  }
}
