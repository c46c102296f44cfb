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
 * `configured` are the module specifiers the config lists: an id among them is inspected by id.
 */
export async function extensionInspect(
  args: readonly string[],
  io: CliIO,
  opts: { json?: boolean; configured?: readonly string[] } = {},
): Promise<number> {
  const target = args[0]
  if (!target) throw new UsageError('usage: sbx extension inspect <module-or-id> [--json]')
  let registry: ExtensionRegistry | undefined
  // An id of an extension listed in the config, e.g. `sbx extension inspect safety-pack`.
  if (opts.configured?.length && /^[a-z0-9][a-z0-9._-]*$/.test(target)) {
    const all = await ExtensionRegistry.of().load(opts.configured, { enable: false })
    if (all.get(target)) registry = all.enable(target)
  }
  registry ??= await ExtensionRegistry.of().load([toModuleSpecifier(target)])
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
