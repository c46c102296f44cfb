import { z } from 'zod'

/** The seven things an extension may contribute. */
export const ExtensionCapability = {
  TOOL: 'tool',
  COMMAND: 'command',
  SKILL: 'skill',
  PROMPT: 'prompt',
  GUARDRAIL: 'guardrail',
  LIFECYCLE: 'lifecycle',
  INTERCEPTOR: 'interceptor',
} as const

export type ExtensionCapability = (typeof ExtensionCapability)[keyof typeof ExtensionCapability]

const CAPABILITIES = Object.values(ExtensionCapability) as [ExtensionCapability, ...ExtensionCapability[]]

/** Schema of an extension manifest. Ids are lowercase and may not contain `__` (tool namespacing). */
export const ExtensionManifestSchema = z
  .object({
    id: z
      .string()
      .regex(/^[a-z0-9](?:[a-z0-9.-]|_(?!_))*$/, 'lowercase letters, digits, ".", "-" and single "_" only'),
    name: z.string().min(1),
    version: z.string().min(1).optional(),
    vendor: z.string().min(1).optional(),
    description: z.string().optional(),
    capabilities: z.array(z.enum(CAPABILITIES)).readonly(),
  })
  .strict()

/** An extension's identity and declared capabilities. */
export type ExtensionManifest = z.input<typeof ExtensionManifestSchema>

/** The namespaced host-facing id of an extension tool: `plugin__<extensionId>__<tool>`. */
export function namespacedToolName(extensionId: string, tool: string): string {
  return `plugin__${extensionId}__${tool}`
}

/**
 * Whether a host-facing tool id names `tool`: the plain built-in name, the full namespaced id, or a
 * `plugin__<ext>__<tool>` suffix match.
 */
export function matchesToolName(hostName: string, tool: string): boolean {
  if (hostName === tool) return true
  return (
    hostName.startsWith('plugin__') && hostName.endsWith(`__${tool}`) && hostName.length > tool.length + 10
  )
}
