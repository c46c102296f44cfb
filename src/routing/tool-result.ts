import { AppError } from '../errors.js'
import type { RouteToDecision } from '../interceptors/decisions.js'
import type { CodeCellPart } from '../sandbox/code/types.js'
import type { ExecResult } from '../sandbox/types.js'

/** The tool-result line of a truncated result (the marker in the stream says how many bytes went). */
export const TRUNCATED_NOTE =
  '[output truncated in the middle: past the output cap the head and the tail are kept, the bytes between are dropped where the output says so]'

/**
 * The tool-result text the model sees for a routed command. Stable format (documented in
 * docs/agent.md, "Tool calls and the tool-result format"):
 *
 * ```
 * exit_code: 0            (or `exit_code: null` and `signal: SIGKILL`)
 * [timed out after 5000 ms; the process group was killed]     (only when timedOut)
 * [output truncated in the middle: ...]                       (only when truncated; the marker line
 *                                                               in stdout/stderr says how many bytes)
 * [sandbox replaced at <ISO time>: files from before are lost (<reason>)]   (until acknowledged;
 *   with a persistent workspace: "the workspace is kept, other files and processes from before are gone")
 * stdout:
 * <stdout, verbatim>
 * stderr:
 * <stderr, verbatim>
 * ```
 * An empty stream is written as `(empty)`.
 */
export function formatExecResult(result: ExecResult, opts: { timeoutMs?: number } = {}): string {
  if (result.code) return formatCodeCell(result, result.code, opts)
  const lines = [`exit_code: ${result.exitCode === null ? 'null' : result.exitCode}`]
  if (result.signal) lines.push(`signal: ${result.signal}`)
  if (result.timedOut) {
    const after = opts.timeoutMs !== undefined ? ` after ${opts.timeoutMs} ms` : ''
    lines.push(`[timed out${after}; the process group was killed]`)
  }
  if (result.truncated) lines.push(TRUNCATED_NOTE)
  if (result.shellRestarted)
    lines.push('[shell restarted: the cwd, variables and functions of earlier calls are gone]')
  replacedLine(result, lines)
  lines.push('stdout:', block(result.stdout), 'stderr:', block(result.stderr))
  return lines.join('\n')
}

/**
 * The tool-result text of a routed code cell (`routeCode`; {@link formatExecResult} picks it when
 * the result has a `code` part). Stable format (docs/code-interpreter.md, "Routed code tools"):
 *
 * ```
 * [kernel restarted: ...]                 (only when the cell ran in a new kernel)
 * [timed out after 5000 ms; ...]          (only when timedOut)
 * [output truncated: ...]                 (only when truncated)
 * [sandbox replaced at <ISO time>: ...]   (until acknowledged)
 * stdout:
 * <stdout, verbatim>
 * stderr:
 * <stderr, verbatim>
 * Out: <text/plain of the last value>     (only when the cell has a value)
 * outputs: display image/png, text/plain  (only when it has rich outputs)
 * exception: <Name>: <value>              (only when the cell raised)
 * traceback:
 * <traceback, verbatim>
 * ```
 */
export function formatCodeCell(
  result: ExecResult,
  cell: CodeCellPart,
  opts: { timeoutMs?: number } = {},
): string {
  const lines: string[] = []
  if (cell.kernelRestarted)
    lines.push('[kernel restarted: variables, imports and definitions of earlier cells are gone]')
  if (result.timedOut) {
    const after = opts.timeoutMs !== undefined ? ` after ${opts.timeoutMs} ms` : ''
    lines.push(`[timed out${after}; the cell was interrupted]`)
  }
  if (result.truncated) lines.push("[output truncated: the cell's output past 1 MiB per stream was dropped]")
  replacedLine(result, lines)
  lines.push('stdout:', block(result.stdout), 'stderr:', block(result.stderr))
  if (cell.text !== null) lines.push(`Out: ${cell.text}`)
  const rich = cell.outputs.filter((o) => o.type === 'display' || o.mimeTypes.some((m) => m !== 'text/plain'))
  if (rich.length > 0)
    lines.push(`outputs: ${rich.map((o) => `${o.type} ${o.mimeTypes.join(', ')}`).join('; ')}`)
  if (cell.error) {
    lines.push(`exception: ${cell.error.name}: ${cell.error.value}`)
    if (cell.error.traceback) lines.push('traceback:', block(cell.error.traceback))
  }
  return lines.join('\n')
}

function replacedLine(result: ExecResult, lines: string[]): void {
  const r = result.sandboxReplaced
  if (!r) return
  const files = r.workspaceKept
    ? 'the workspace is kept, other files and processes from before are gone'
    : 'files from before are lost'
  lines.push(`[sandbox replaced at ${new Date(r.at).toISOString()}: ${files} (${r.reason})]`)
}

function block(text: string): string {
  if (text.length === 0) return '(empty)'
  return text.endsWith('\n') ? text.slice(0, -1) : text
}

/**
 * The tool-result text for a call that could not run: `error: <CODE>: <message>`. Never includes a
 * stack trace or secrets; the message says how to fix the problem.
 */
export function formatToolError(err: unknown): string {
  if (err instanceof AppError) return `error: ${err.code}: ${err.message}`
  if (err instanceof Error) return `error: ${err.message}`
  return `error: ${String(err)}`
}

/** The tool-result text for a call or output an interceptor blocked: `blocked: <reason>`. */
export function formatBlocked(reason: string): string {
  return `blocked: ${reason}`
}

/** The error of a call routed where no router exists: it did not run, and never runs locally. */
export function noRouterError(
  toolName: string,
  route: Pick<RouteToDecision, 'providerId' | 'profile'>,
): AppError {
  return new AppError(
    'CONFIG_INVALID',
    `tool call "${toolName}" was routed to provider "${route.providerId}" profile "${route.profile}", but this agent has no router, so it did not run (routed calls never fall back to local execution); pass createAgent({ router }) with the execution plane's RouteExecutor`,
  )
}
