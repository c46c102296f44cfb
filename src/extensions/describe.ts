import type { AppliedExtension } from './registry.js'

/**
 * Human-readable description of an applied extension: its manifest, capabilities and one line per
 * contribution kind (what `sbx extension inspect` prints).
 */
export function describeExtension(ext: AppliedExtension): string {
  const m = ext.manifest
  const c = ext.contributions
  const names = (xs: readonly { name: string }[]): string =>
    xs.length ? ` (${xs.map((x) => x.name).join(', ')})` : ''
  return [
    `id=${m.id}`,
    `name=${m.name}`,
    `version=${m.version ?? '-'}`,
    `vendor=${m.vendor ?? '-'}`,
    `capabilities=${m.capabilities.join(',') || '-'}`,
    `tools=${c.tools.length}${names(c.tools)}`,
    `commands=${c.commands.length}${names(c.commands)}`,
    `skills=${c.skills.length}${names(c.skills)}`,
    `prompts=${c.prompts.length}${names(c.prompts)}`,
    `guardrails=${c.guardrails.length}${names(c.guardrails)}`,
    `lifecycleHooks=${c.lifecycleHooks.length}${names(c.lifecycleHooks)}`,
    `toolCallInterceptors=${c.toolCallInterceptors.length}${names(c.toolCallInterceptors)}`,
    `promptInterceptors=${c.promptInterceptors.length}${names(c.promptInterceptors)}`,
    `modelRequestInterceptors=${c.modelRequestInterceptors.length}${names(c.modelRequestInterceptors)}`,
  ].join('\n')
}
