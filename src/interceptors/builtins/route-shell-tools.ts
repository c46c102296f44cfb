import { matchesToolName } from '../../extensions/manifest.js'
import { ToolCallDecision } from '../decisions.js'
import type { ToolCallInterceptor, ToolCallRequest } from '../types.js'

/** Options of {@link routeShellTools}. */
export interface RouteShellToolsOptions {
  /** Sandbox provider id, e.g. `docker`, `daytona`, `e2b`. */
  providerId: string
  /** Profile name registered for that provider. */
  profile: string
  /**
   * Tool names to route. Built-in names match exactly; extension tools match by their
   * `plugin__<ext>__<tool>` suffix. @default ['bash', 'shell', 'sh']
   */
  tools?: readonly string[]
  /** Maps a call to its command line; `undefined` blocks the call. @default {@link extractShellCommand} */
  extractCommand?: (request: ToolCallRequest) => string | undefined
  /** Interceptor name. @default 'route-shell-tools' */
  name?: string
}

const COMMAND_KEYS = ['command', 'cmd', 'script', 'commandLine', 'command_line', 'input'] as const

/**
 * Reads a command from a tool call's JSON arguments: the first non-empty string among `command`,
 * `cmd`, `script`, `commandLine`, `command_line`, `input`; an array `command` is joined with shell quoting;
 * a bare JSON string is the command itself.
 */
export function extractShellCommand(request: ToolCallRequest): string | undefined {
  let args: unknown
  try {
    args = JSON.parse(request.arguments)
  } catch {
    return undefined
  }
  if (typeof args === 'string') return args.trim() ? args : undefined
  if (!args || typeof args !== 'object') return undefined
  const rec = args as Record<string, unknown>
  for (const key of COMMAND_KEYS) {
    const v = rec[key]
    if (typeof v === 'string' && v.trim()) return v
    if (Array.isArray(v) && v.length > 0 && v.every((p) => typeof p === 'string')) {
      return v.map(shellQuote).join(' ')
    }
  }
  return undefined
}

/** Quotes one word for a POSIX shell. */
export function shellQuote(word: string): string {
  return /^[A-Za-z0-9_@%+=:,./-]+$/.test(word) ? word : `'${word.replaceAll("'", `'\\''`)}'`
}

/**
 * Routes shell-style tools into a sandbox with `routeTo`; other tools pass. A shell call whose
 * arguments carry no command is blocked with a reason the model can act on.
 *
 * @example
 * createAgent({ model, toolInterceptors: [routeShellTools({ providerId: 'docker', profile: 'default' })] })
 */
export function routeShellTools(options: RouteShellToolsOptions): ToolCallInterceptor {
  const tools = options.tools ?? ['bash', 'shell', 'sh']
  const extract = options.extractCommand ?? extractShellCommand
  const { providerId, profile } = options
  // Validate eagerly so a misconfiguration fails at startup, not on the first call.
  ToolCallDecision.routeTo(providerId, profile, 'true')
  return {
    name: options.name ?? 'route-shell-tools',
    beforeToolCall(request) {
      if (!tools.some((t) => matchesToolName(request.name, t))) return ToolCallDecision.allow()
      const command = extract(request)
      if (command === undefined) {
        return ToolCallDecision.block(
          `tool "${request.name}" needs a command: pass arguments like {"command": "ls -la"}`,
        )
      }
      return ToolCallDecision.routeTo(providerId, profile, command)
    },
  }
}
