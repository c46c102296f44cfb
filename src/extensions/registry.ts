import type { Tool } from '../agent/tool.js'
import type {
  ModelRequestInterceptor,
  PromptInterceptor,
  ToolCallInterceptor,
} from '../interceptors/types.js'
import type { LifecycleHook } from '../lifecycle/events.js'
import type {
  ExtensionCommand,
  ExtensionContext,
  ExtensionContributions,
  ExtensionGuardrail,
  ExtensionPrompt,
  ExtensionSkill,
} from './context.js'
import { createExtensionContext } from './context.js'
import { ExtensionError } from './errors.js'
import type { ExtensionManifest } from './manifest.js'
import { ExtensionManifestSchema } from './manifest.js'
import { assertUniqueNames } from './unique.js'

/** An extension: a manifest and an `apply` that registers its contributions. */
export interface Extension {
  readonly manifest: Readonly<ExtensionManifest>
  apply(ctx: ExtensionContext): void
}

/** Declares an extension, validating its manifest now (a bad id or capability fails at import). */
export function defineExtension(extension: Extension): Extension {
  const parsed = ExtensionManifestSchema.safeParse(extension?.manifest)
  if (!parsed.success) {
    const issue = parsed.error.issues[0]
    throw new ExtensionError(
      `invalid extension manifest${issue ? ` at "${issue.path.join('.')}": ${issue.message}` : ''}`,
      parsed.error,
    )
  }
  if (typeof extension.apply !== 'function') {
    throw new ExtensionError(`extension "${parsed.data.id}" has no apply(ctx) function`)
  }
  return Object.freeze({ manifest: Object.freeze(parsed.data), apply: extension.apply.bind(extension) })
}

/** One enabled extension and what it contributed. */
export interface AppliedExtension {
  readonly manifest: Readonly<ExtensionManifest>
  readonly contributions: ExtensionContributions
}

/** The assembled view of every enabled extension, in enable order. */
export interface ExtensionSnapshot {
  readonly extensions: readonly AppliedExtension[]
  readonly toolCallInterceptors: readonly ToolCallInterceptor[]
  readonly promptInterceptors: readonly PromptInterceptor[]
  readonly modelRequestInterceptors: readonly ModelRequestInterceptor[]
  readonly lifecycleHooks: readonly LifecycleHook[]
  readonly tools: readonly Tool[]
  readonly commands: readonly ExtensionCommand[]
  readonly skills: readonly ExtensionSkill[]
  readonly prompts: readonly ExtensionPrompt[]
  readonly guardrails: readonly ExtensionGuardrail[]
}

/**
 * Known extensions and the enabled subset. Interceptors and hooks take effect when their extension
 * is enabled; extensions apply in enable order, so their interceptors run in registration order.
 */
export class ExtensionRegistry {
  private readonly known = new Map<string, Extension>()
  private readonly enabled: string[] = []
  private cached: ExtensionSnapshot | undefined

  private constructor() {}

  /** A registry knowing `extensions` (none enabled yet). Duplicate ids throw. */
  static of(...extensions: Extension[]): ExtensionRegistry {
    const r = new ExtensionRegistry()
    for (const e of extensions) r.add(e)
    return r
  }

  /**
   * Imports modules whose default export is an extension (how a service loads the extensions listed
   * in its config) and makes them known; with `enable` (default true) also enables them.
   */
  async load(moduleSpecifiers: readonly string[], opts: { enable?: boolean } = {}): Promise<this> {
    for (const spec of moduleSpecifiers) {
      let mod: { default?: unknown }
      try {
        mod = (await import(spec)) as { default?: unknown }
      } catch (err) {
        throw new ExtensionError(`cannot load extension module "${spec}": ${(err as Error).message}`, err)
      }
      const candidate = mod.default as Extension | undefined
      if (!candidate || typeof candidate !== 'object' || !('manifest' in candidate)) {
        throw new ExtensionError(
          `module "${spec}" has no extension as its default export (export default defineExtension({...}))`,
        )
      }
      const ext = defineExtension(candidate)
      this.add(ext)
      if (opts.enable ?? true) this.enable(ext.manifest.id)
    }
    return this
  }

  /** Enables known extensions by id. An unknown id throws, listing the known ids. */
  enable(...ids: string[]): this {
    for (const id of ids) {
      if (!this.known.has(id)) {
        const list = [...this.known.keys()].sort().join(', ') || '(none)'
        throw new ExtensionError(`unknown extension id "${id}"; known ids: ${list}`)
      }
      if (!this.enabled.includes(id)) this.enabled.push(id)
    }
    this.cached = undefined
    return this
  }

  /** Ids of every known extension. */
  knownIds(): string[] {
    return [...this.known.keys()]
  }

  /** Ids of the enabled extensions, in enable order. */
  enabledIds(): string[] {
    return [...this.enabled]
  }

  /** The known extension with `id`, if any. */
  get(id: string): Extension | undefined {
    return this.known.get(id)
  }

  /**
   * Applies every enabled extension and assembles their contributions. Fails fast on duplicate
   * interceptor names within a chain (`duplicate <kind> interceptor id: <name>`).
   */
  snapshot(): ExtensionSnapshot {
    if (this.cached) return this.cached
    const applied = this.enabled.map((id) => applyExtension(this.known.get(id) as Extension))
    const all = <K extends keyof ExtensionContributions>(k: K) =>
      applied.flatMap((a) => a.contributions[k] as ExtensionContributions[K][number][])
    const snap: ExtensionSnapshot = {
      extensions: applied,
      toolCallInterceptors: all('toolCallInterceptors'),
      promptInterceptors: all('promptInterceptors'),
      modelRequestInterceptors: all('modelRequestInterceptors'),
      lifecycleHooks: all('lifecycleHooks'),
      tools: all('tools'),
      commands: all('commands'),
      skills: all('skills'),
      prompts: all('prompts'),
      guardrails: all('guardrails'),
    }
    assertUniqueNames('tool-call', snap.toolCallInterceptors)
    assertUniqueNames('prompt', snap.promptInterceptors)
    assertUniqueNames('model-request', snap.modelRequestInterceptors)
    this.cached = snap
    return snap
  }

  private add(ext: Extension): void {
    const valid = defineExtension(ext)
    const id = valid.manifest.id
    if (this.known.has(id)) throw new ExtensionError(`duplicate extension id: ${id}`)
    this.known.set(id, valid)
    this.cached = undefined
  }
}

/** Runs one extension's `apply` against a fresh context. */
export function applyExtension(ext: Extension): AppliedExtension {
  const { ctx, contributions } = createExtensionContext(ext.manifest)
  try {
    ext.apply(ctx)
  } catch (err) {
    if (err instanceof ExtensionError) throw err
    throw new ExtensionError(
      `extension "${ext.manifest.id}" failed in apply: ${(err as Error)?.message ?? String(err)}`,
      err,
    )
  }
  return { manifest: ext.manifest, contributions }
}
