import { matchesToolName } from '../../extensions/manifest.js'
import { ToolCallDecision } from '../decisions.js'
import type { ToolCallInterceptor } from '../types.js'

/** Options of {@link forceWorkingDirectory}. */
export interface ForceWorkingDirectoryOptions {
  /** Argument key to pin. @default 'cwd' */
  key?: string
  /** Only these tools (exact or `__<tool>` suffix); all tools with JSON-object arguments when absent. */
  tools?: readonly string[]
  /** @default 'force-working-directory' */
  name?: string
}

/**
 * Pins the `cwd` argument of tool calls to `dir` with a modify verdict (a compliance plugin's
 * classic). Calls whose arguments are not a JSON object pass unchanged; a call already at `dir` is
 * allowed as is.
 *
 * @example forceWorkingDirectory('/workspace/project')
 */
export function forceWorkingDirectory(
  dir: string,
  options: ForceWorkingDirectoryOptions = {},
): ToolCallInterceptor {
  if (!dir) throw new TypeError('forceWorkingDirectory needs a directory')
  const key = options.key ?? 'cwd'
  return {
    name: options.name ?? 'force-working-directory',
    beforeToolCall(request) {
      if (options.tools && !options.tools.some((t) => matchesToolName(request.name, t))) {
        return ToolCallDecision.allow()
      }
      let args: unknown
      try {
        args = JSON.parse(request.arguments)
      } catch {
        return ToolCallDecision.allow()
      }
      if (!args || typeof args !== 'object' || Array.isArray(args)) return ToolCallDecision.allow()
      if ((args as Record<string, unknown>)[key] === dir) return ToolCallDecision.allow()
      return ToolCallDecision.modify(null, JSON.stringify({ ...args, [key]: dir }))
    },
  }
}
