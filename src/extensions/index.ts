export {
  ExtensionCapability,
  ExtensionManifestSchema,
  matchesToolName,
  namespacedToolName,
} from './manifest.js'
export type { ExtensionManifest } from './manifest.js'
export { ExtensionError } from './errors.js'
export { createExtensionContext } from './context.js'
export type {
  ExtensionCommand,
  ExtensionContext,
  ExtensionContributions,
  ExtensionGuardrail,
  ExtensionPrompt,
  ExtensionSkill,
} from './context.js'
export { ExtensionRegistry, applyExtension, defineExtension } from './registry.js'
export type { AppliedExtension, Extension, ExtensionSnapshot } from './registry.js'
export { composeInterceptors, guardrailInterceptor } from './compose.js'
export type { HostInterceptors, InterceptorChains } from './compose.js'
export { describeExtension } from './describe.js'
