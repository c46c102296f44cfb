import type { InterceptorContext, ToolCallRequest } from '../interceptors/types.js'
import { formatToolError } from '../routing/tool-result.js'
import type { ToolCallOutcome, ToolCallRecord } from './agent-interceptor.js'
import type { AgentConfig } from './config.js'
import { ToolCallError } from './errors.js'
import { NEVER_ABORTED } from './signals.js'
import type { ToolExecuteContext } from './tool.js'

/** Result of a local dispatch (before the after-chain). */
export interface LocalDispatch {
  output: string
  outcome: ToolCallOutcome
  via: ToolCallRecord['via']
  executed: boolean
}

const failed = (err: unknown, executed: boolean): LocalDispatch => ({
  output: formatToolError(err),
  outcome: 'error',
  via: executed ? 'local' : 'none',
  executed,
})

/**
 * Runs an allowed call with the tool's own `execute`: unknown tools, tools without `execute`
 * (shell-style tools are never run on the host), invalid JSON and schema violations become error
 * results without running anything; a throw or a timeout becomes an error result after running.
 */
export async function runLocalTool(
  cfg: AgentConfig,
  call: ToolCallRequest,
  ictx: InterceptorContext,
  signal: AbortSignal,
): Promise<LocalDispatch> {
  const compiled = cfg.tools.get(call.name)
  if (!compiled) {
    const names = [...cfg.tools.keys()].join(', ') || '(none)'
    return failed(
      new ToolCallError(
        'NOT_FOUND',
        `unknown tool "${call.name}"; available tools: ${names}. Call one of them by its exact name.`,
      ),
      false,
    )
  }
  const { tool } = compiled
  if (!tool.execute) {
    return failed(
      new ToolCallError(
        'CONFIG_INVALID',
        `tool "${call.name}" has no local execute and no interceptor routed it, so it did not run; shell-style tools run only in a sandbox: route them with a routeTo interceptor (e.g. routeShellTools) or give the tool an execute function`,
      ),
      false,
    )
  }
  let args: unknown
  try {
    args = call.arguments.trim() === '' ? {} : JSON.parse(call.arguments)
  } catch (err) {
    return failed(
      new ToolCallError(
        'BAD_REQUEST',
        `arguments of tool "${call.name}" are not valid JSON (${(err as Error).message}); send one JSON object matching the tool's parameters`,
      ),
      false,
    )
  }
  const checked = compiled.validate(args)
  if (!checked.ok) {
    return failed(
      new ToolCallError(
        'BAD_REQUEST',
        `invalid arguments for tool "${call.name}": ${checked.message}; fix them and call again`,
      ),
      false,
    )
  }
  const execute = tool.execute
  const timeoutMs = tool.timeoutMs ?? cfg.toolTimeoutMs
  try {
    const value = await withTimeout(call.name, timeoutMs, signal, (lazySignal) =>
      execute.call(tool, checked.value, new ExecuteContext(ictx, call.callId, lazySignal)),
    )
    return { output: toOutput(value), outcome: 'ok', via: 'local', executed: true }
  } catch (err) {
    if (signal.aborted) throw signal.reason
    return failed(err, true)
  }
}

/** The context a local tool receives; its `signal` is created on first read. */
class ExecuteContext implements ToolExecuteContext {
  readonly tenant: string | undefined
  readonly sessionId: string | undefined
  readonly attributes: Readonly<Record<string, unknown>> | undefined
  constructor(
    ictx: InterceptorContext,
    readonly callId: string,
    private readonly lazySignal: () => AbortSignal,
  ) {
    this.tenant = ictx.tenant
    this.sessionId = ictx.sessionId
    this.attributes = ictx.attributes
  }
  get signal(): AbortSignal {
    return this.lazySignal()
  }
}

/** A tool's return value as the model sees it: strings verbatim, nothing as '', anything else as JSON. */
export function toOutput(value: unknown): string {
  if (typeof value === 'string') return value
  if (value === undefined || value === null) return ''
  try {
    return JSON.stringify(value) ?? String(value)
  } catch {
    return String(value)
  }
}

/**
 * Calls `fn` with a signal that aborts when `parent` aborts or `timeoutMs` passes; on timeout the
 * promise rejects with a {@link ToolCallError} even if `fn` ignores its signal. The signal is created
 * lazily, on first read (most tools never read it).
 */
function withTimeout<T>(
  name: string,
  timeoutMs: number,
  parent: AbortSignal,
  fn: (signal: () => AbortSignal) => T | Promise<T>,
): Promise<T> {
  if (parent.aborted) return Promise.reject(parent.reason as unknown)
  let ac: AbortController | undefined
  let reason: { value: unknown } | undefined
  const signal = (): AbortSignal => {
    if (!ac) {
      ac = new AbortController()
      if (reason) ac.abort(reason.value)
    }
    return ac.signal
  }
  const abort = (value: unknown): void => {
    reason = { value }
    ac?.abort(value)
  }
  const watchParent = parent !== NEVER_ABORTED
  return new Promise<T>((resolve, reject) => {
    let timer: ReturnType<typeof setTimeout> | undefined = undefined
    const settle = (ok: boolean, value: unknown): void => {
      clearTimeout(timer)
      if (watchParent) parent.removeEventListener('abort', onAbort)
      if (ok) resolve(value as T)
      else reject(value)
    }
    const onAbort = (): void => {
      abort(parent.reason)
      settle(false, parent.reason)
    }
    timer = setTimeout(() => {
      const err = new ToolCallError(
        'UNAVAILABLE',
        `tool "${name}" timed out after ${timeoutMs} ms and was cancelled; try a smaller task or different arguments`,
        { retryable: true },
      )
      abort(err)
      settle(false, err)
    }, timeoutMs)
    if (watchParent) parent.addEventListener('abort', onAbort, { once: true })
    Promise.resolve()
      .then(() => fn(signal))
      .then(
        (v) => settle(true, v),
        (e: unknown) => settle(false, e),
      )
  })
}
