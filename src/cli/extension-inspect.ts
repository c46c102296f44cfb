import { isAbsolute, resolve } from 'node:path'
import { pathToFileURL } from 'node:url'
import { ExtensionRegistry, describeExtension } from '../extensions/index.js'
import type { CliIO } from './output.js'
import { UsageError } from './output.js'

/** Turns a CLI argument into an import specifier: paths become file URLs, package names stay. */
export function toModuleSpecifier(arg: string): string {
  if (arg.startsWith('file:')) return arg
  if (arg.startsWith('.') || isAbsolute(arg) || /\.[cm]?[jt]s$/.test(arg)) {
    return pathToFileURL(resolve(arg)).href
  }
  return arg
}

/**
 * `sbx extension inspect <module-or-id> [--json]`: loads the extension, applies it, prints its
 * manifest, capabilities and one line per contribution kind (incl. `lifecycleHooks=<n>`).
 * `configured` maps ids of extensions listed in the config to their module specifiers.
 */
export async function extensionInspect(
  args: readonly string[],
  io: CliIO,
  opts: { json?: boolean; configured?: Readonly<Record<string, string>> } = {},
): Promise<number> {
  const target = args[0]
  if (!target) throw new UsageError('usage: sbx extension inspect <module-or-id> [--json]')
  const spec = opts.configured?.[target] ?? toModuleSpecifier(target)
  const registry = await ExtensionRegistry.of().load([spec])
  const snap = registry.snapshot()
  for (const ext of snap.extensions) {
    if (opts.json) {
      const c = ext.contributions
      const names = (xs: readonly { name: string }[]) => xs.map((x) => x.name)
      io.out(
        JSON.stringify({
          manifest: ext.manifest,
          tools: names(c.tools),
          commands: names(c.commands),
          skills: names(c.skills),
          prompts: names(c.prompts),
          guardrails: names(c.guardrails),
          lifecycleHooks: names(c.lifecycleHooks),
          toolCallInterceptors: names(c.toolCallInterceptors),
          promptInterceptors: names(c.promptInterceptors),
          modelRequestInterceptors: names(c.modelRequestInterceptors),
        }),
      )
    } else {
      io.out(describeExtension(ext))
    }
  }
  return 0
}
