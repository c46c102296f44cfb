import type { RouteToDecision } from '../interceptors/decisions.js'
import type { ToolCallRequest } from '../interceptors/types.js'
import type { RouteRequest } from './types.js'

/** What a routed call's job knows besides the verdict: who runs it, where, and for how long. */
export interface RouteScope {
  readonly tenant?: string
  readonly sessionId?: string
  /** The tool's own timeout (ms); the profile default when absent. */
  readonly timeoutMs?: number
}

/**
 * The {@link RouteRequest} a routeTo verdict becomes: its target and command, the call's id and tool
 * name, the scope's tenant, session and timeout, and the `cwd` of the *effective* arguments (so a
 * directory pinned by `forceWorkingDirectory` reaches the sandbox on every surface). A code verdict
 * (`run: { kind: 'code' }`) becomes a code route: the cell and its language, no cwd or shell.
 */
export function routeRequestOf(
  route: RouteToDecision,
  call: ToolCallRequest,
  scope: RouteScope,
): RouteRequest {
  if (route.run?.kind === 'code') {
    // A cell runs in the session's kernel: no shell, no per-call working directory.
    return {
      providerId: route.providerId,
      profile: route.profile,
      command: route.command,
      code: { language: route.run.language },
      callId: call.callId,
      toolName: call.name,
      ...(scope.tenant === undefined ? {} : { tenant: scope.tenant }),
      ...(scope.sessionId === undefined ? {} : { sessionId: scope.sessionId }),
      ...(scope.timeoutMs === undefined ? {} : { timeoutMs: scope.timeoutMs }),
    }
  }
  const cwd = cwdOf(call.arguments)
  return {
    providerId: route.providerId,
    profile: route.profile,
    command: route.command,
    callId: call.callId,
    toolName: call.name,
    ...(scope.tenant === undefined ? {} : { tenant: scope.tenant }),
    ...(scope.sessionId === undefined ? {} : { sessionId: scope.sessionId }),
    ...(cwd === undefined ? {} : { cwd }),
    ...(scope.timeoutMs === undefined ? {} : { timeoutMs: scope.timeoutMs }),
    // A tool call's shell lives on (cd, exports, functions) where the sandbox can keep one; a call's or
    // profile's `shell` wins, and a sandbox without persistent shells runs it fresh.
    shellDefault: 'persistent',
  }
}

/** An absolute `cwd` string in a call's JSON-object arguments, if any. */
export function cwdOf(args: string): string | undefined {
  try {
    const v = (JSON.parse(args) as { cwd?: unknown } | null)?.cwd
    return typeof v === 'string' && v.startsWith('/') ? v : undefined
  } catch {
    return undefined
  }
}
