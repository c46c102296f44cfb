import type { Tool } from '../agent/tool.js'
import type {
  InterceptorContext,
  MaybePromise,
  ModelRequestInterceptor,
  PromptInterceptor,
  ToolCallInterceptor,
  ToolCallRequest,
} from '../interceptors/types.js'
import type { LifecycleHook } from '../lifecycle/events.js'
import { ExtensionError } from './errors.js'
import type { ExtensionCapability, ExtensionManifest } from './manifest.js'
import { namespacedToolName } from './manifest.js'

/** A slash-style command contributed by an extension (for CLIs and chat surfaces). */
export interface ExtensionCommand {
  readonly name: string
  readonly description?: string
  run(args: readonly string[]): MaybePromise<string>
}

/** A skill: named instructions the host may offer to the model. */
export interface ExtensionSkill {
  readonly name: string
  readonly description?: string
  readonly content: string
}

/** A named prompt template. */
export interface ExtensionPrompt {
  readonly name: string
  readonly description?: string
  readonly template: string
}

/** An allow/deny policy on tool calls (simpler than an interceptor: no rewrite, no routing). */
export interface ExtensionGuardrail {
  readonly name: string
  check(
    request: ToolCallRequest,
    ctx: InterceptorContext,
  ): MaybePromise<{ allow: true } | { allow: false; reason: string }>
}

/** Everything one extension contributed while `apply` ran. */
export interface ExtensionContributions {
  readonly toolCallInterceptors: ToolCallInterceptor[]
  readonly promptInterceptors: PromptInterceptor[]
  readonly modelRequestInterceptors: ModelRequestInterceptor[]
  readonly lifecycleHooks: LifecycleHook[]
  /** Tools under their namespaced ids (`plugin__<id>__<tool>`). */
  readonly tools: Tool[]
  readonly commands: ExtensionCommand[]
  readonly skills: ExtensionSkill[]
  readonly prompts: ExtensionPrompt[]
  readonly guardrails: ExtensionGuardrail[]
}

/** What an extension's `apply(ctx)` registers into. Each surface checks the declared capability. */
export interface ExtensionContext {
  readonly manifest: Readonly<ExtensionManifest>
  readonly interceptors: {
    registerToolCall(interceptor: ToolCallInterceptor): void
    registerPrompt(interceptor: PromptInterceptor): void
    registerModelRequest(interceptor: ModelRequestInterceptor): void
  }
  readonly lifecycle: { register(hook: LifecycleHook): void }
  readonly tools: { register(tool: Tool): void }
  readonly commands: { register(command: ExtensionCommand): void }
  readonly skills: { register(skill: ExtensionSkill): void }
  readonly prompts: { register(prompt: ExtensionPrompt): void }
  readonly guardrails: { register(guardrail: ExtensionGuardrail): void }
}

/** Builds the context handed to one extension's `apply`, and the contributions it collects. */
export function createExtensionContext(manifest: ExtensionManifest): {
  ctx: ExtensionContext
  contributions: ExtensionContributions
} {
  const declared = new Set<ExtensionCapability>(manifest.capabilities)
  const c: ExtensionContributions = {
    toolCallInterceptors: [],
    promptInterceptors: [],
    modelRequestInterceptors: [],
    lifecycleHooks: [],
    tools: [],
    commands: [],
    skills: [],
    prompts: [],
    guardrails: [],
  }
  const require = (cap: ExtensionCapability): void => {
    if (!declared.has(cap)) throw new ExtensionError(`did not declare capability: ${cap}`)
  }
  const named = <T extends { name: string }>(what: string, item: T): T => {
    if (!item || typeof item.name !== 'string' || item.name.length === 0) {
      throw new ExtensionError(`extension "${manifest.id}" registered a ${what} without a name`)
    }
    return item
  }
  const ctx: ExtensionContext = {
    manifest,
    interceptors: {
      registerToolCall: (i) => (
        require('interceptor'),
        c.toolCallInterceptors.push(named('tool-call interceptor', i))
      ),
      registerPrompt: (i) => (
        require('interceptor'),
        c.promptInterceptors.push(named('prompt interceptor', i))
      ),
      registerModelRequest: (i) => (
        require('interceptor'),
        c.modelRequestInterceptors.push(named('model-request interceptor', i))
      ),
    },
    lifecycle: { register: (h) => (require('lifecycle'), c.lifecycleHooks.push(named('lifecycle hook', h))) },
    tools: {
      register: (t) => {
        require('tool')
        named('tool', t)
        c.tools.push({ ...t, name: namespacedToolName(manifest.id, t.name) })
      },
    },
    commands: { register: (x) => (require('command'), c.commands.push(named('command', x))) },
    skills: { register: (x) => (require('skill'), c.skills.push(named('skill', x))) },
    prompts: { register: (x) => (require('prompt'), c.prompts.push(named('prompt', x))) },
    guardrails: { register: (x) => (require('guardrail'), c.guardrails.push(named('guardrail', x))) },
  }
  return { ctx, contributions: c }
}
