import { matchesToolName } from '../../extensions/manifest.js'
import type { CodeLanguage } from '../../sandbox/code/types.js'
import { ToolCallDecision } from '../decisions.js'
import type { ToolCallInterceptor, ToolCallRequest } from '../types.js'

/** A code cell read from a tool call: its source and, when the call names one, its language. */
export interface CodeCell {
  readonly code: string
  /** The language the call asked for (its `language` argument); absent: the interceptor's default. */
  readonly language?: CodeLanguage
}

/** Options of {@link routeCodeTools}. */
export interface RouteCodeToolsOptions {
  /** Sandbox provider id, e.g. `docker`, `daytona`, `e2b`. */
  providerId: string
  /** Profile name registered for that provider; its image needs `python3` / `node` (e.g. `dev`). */
  profile: string
  /**
   * Tool names to route. Built-in names match exactly; extension tools match by their
   * `plugin__<ext>__<tool>` suffix. @default {@link DEFAULT_CODE_TOOLS}
   */
  tools?: readonly string[]
  /** The kernel of calls that name no language. @default 'python' */
  language?: CodeLanguage
  /**
   * Maps a call to its cell; `undefined` blocks the call, a string is the reason of a block.
   * @default {@link extractCodeCell}
   */
  extractCode?: (request: ToolCallRequest) => CodeCell | string | undefined
  /** Interceptor name. @default 'route-code-tools' */
  name?: string
}

/** The tool names {@link routeCodeTools} routes by default. */
export const DEFAULT_CODE_TOOLS: readonly string[] = [
  'python',
  'run_code',
  'execute_python',
  'run_python',
  'code_interpreter',
  'execute_code',
]

const CODE_KEYS = ['code', 'source', 'script', 'input'] as const

const LANGUAGE_NAMES: Readonly<Record<string, CodeLanguage>> = {
  python: 'python',
  python3: 'python',
  py: 'python',
  javascript: 'javascript',
  js: 'javascript',
  node: 'javascript',
}

/**
 * Reads a cell from a tool call's JSON arguments: the first non-blank string among `code`, `source`,
 * `script`, `input` (a bare JSON string is the cell itself), and the `language` argument (`python` or
 * `javascript`; `py`, `js` and `node` are accepted too). Answers `undefined` when there is no code and
 * a reason text when the language is not one the kernel runs.
 */
export function extractCodeCell(request: ToolCallRequest): CodeCell | string | undefined {
  let args: unknown
  try {
    args = JSON.parse(request.arguments)
  } catch {
    return undefined
  }
  if (typeof args === 'string') return args.trim() ? { code: args } : undefined
  if (!args || typeof args !== 'object' || Array.isArray(args)) return undefined
  const rec = args as Record<string, unknown>
  const code = CODE_KEYS.map((k) => rec[k]).find((v): v is string => typeof v === 'string' && v.trim() !== '')
  if (code === undefined) return undefined
  const lang = rec['language']
  if (lang === undefined || lang === null || lang === '') return { code }
  const language = typeof lang === 'string' ? LANGUAGE_NAMES[lang.toLowerCase()] : undefined
  if (!language) {
    return `tool "${request.name}" runs python or javascript, not ${JSON.stringify(lang)}: pass "language": "python" or "javascript" (or leave it out)`
  }
  return { code, language }
}

/**
 * Routes code tools (`python`, `run_code`, …) into a sandbox as cells of the session's stateful
 * kernel, with a `routeTo` verdict whose `run` is `{ kind: 'code', language }`; other tools pass.
 * The cell runs as a job of the same queue as routed shell commands (fenced, cancellable, on any
 * worker of the fleet). A call whose arguments carry no code is blocked with a reason the model can
 * act on.
 *
 * @example
 * createAgent({ model, toolInterceptors: [routeCodeTools({ providerId: 'docker', profile: 'dev' })] })
 */
export function routeCodeTools(options: RouteCodeToolsOptions): ToolCallInterceptor {
  const tools = options.tools ?? DEFAULT_CODE_TOOLS
  const extract = options.extractCode ?? extractCodeCell
  const fallback = options.language ?? 'python'
  const { providerId, profile } = options
  // Validate eagerly so a misconfiguration fails at startup, not on the first call.
  ToolCallDecision.routeCode(providerId, profile, 'None', fallback)
  if (tools.length === 0 || !tools.every((t) => typeof t === 'string' && t.length > 0)) {
    throw new TypeError(`routeCodeTools tools must be non-empty tool names, got ${JSON.stringify(tools)}`)
  }
  return {
    name: options.name ?? 'route-code-tools',
    beforeToolCall(request) {
      if (!tools.some((t) => matchesToolName(request.name, t))) return ToolCallDecision.allow()
      const cell = extract(request)
      if (typeof cell === 'string') return ToolCallDecision.block(cell)
      if (cell === undefined || !cell.code.trim()) {
        return ToolCallDecision.block(
          `tool "${request.name}" needs code to run: pass arguments like {"code": "print(1 + 1)"}`,
        )
      }
      return ToolCallDecision.routeCode(providerId, profile, cell.code, cell.language ?? fallback)
    },
  }
}
