import type { z } from 'zod'
import { extractShellCommand } from '../interceptors/builtins/route-shell-tools.js'

/*
 * Bounds on what a command may carry, checked by the request-body schemas (src/services, used by the
 * HTTP API and MCP) so bad input is a 400 before any job exists. They sit below what the Docker
 * sandbox really accepts (measured through `sbx serve`): its agent refuses an EXEC frame with more
 * than 4,096 env variables ("protocol: EINVAL"); the command reaches the shell as one `bash -c`
 * argument and each variable as one `NAME=value` string, and Linux refuses any such string over
 * 131,072 bytes with its NUL (MAX_ARG_STRLEN, "E2BIG"); all of them together, with the sandbox's own
 * environment, must fit execve's ARG_MAX (2 MiB with the 8 MiB stack limit of the sandbox).
 */

/** Most env variables one command may set (the agent's own limit is 4,096). */
export const MAX_ENV_VARS = 2_048
/** Most bytes (UTF-8) of one `NAME=value`: Linux's MAX_ARG_STRLEN less its NUL. */
export const MAX_ARG_BYTES = 131_071
/** Most bytes (UTF-8) of every `NAME=value` of one command together: half of ARG_MAX (2 MiB). */
export const MAX_ENV_BYTES = 1_048_576
/** Most bytes (UTF-8) of one command line: it is one argument of `bash -c`. */
export const MAX_COMMAND_BYTES = MAX_ARG_BYTES

const NUL_RULE = 'must not contain NUL (U+0000) characters'
const SCRIPT_HINT = 'write the script to a file (PUT /v1/sessions/:id/files) and run the file instead'

/** Adds an issue at `path` when `text` holds a NUL: no command, path or env value can carry one. */
function refuseNul(text: string, path: (string | number)[], ctx: z.RefinementCtx): void {
  if (text.includes('\0')) ctx.addIssue({ code: 'custom', path, message: NUL_RULE })
}

/** NUL and the byte bound of a command line (at `path`). */
export function checkCommand(command: string, path: (string | number)[], ctx: z.RefinementCtx): void {
  refuseNul(command, path, ctx)
  const bytes = Buffer.byteLength(command)
  if (bytes > MAX_COMMAND_BYTES)
    ctx.addIssue({
      code: 'custom',
      path,
      message: `is ${bytes} bytes as UTF-8; at most ${MAX_COMMAND_BYTES} (one argument of the shell); ${SCRIPT_HINT}`,
    })
}

/** NUL in a working directory (at `path`). */
export function checkCwd(cwd: string, path: (string | number)[], ctx: z.RefinementCtx): void {
  refuseNul(cwd, path, ctx)
}

/** NUL in values, the count, and the byte bounds of an `env` map (names are checked by their regex). */
export function checkEnv(env: Record<string, string>, ctx: z.RefinementCtx): void {
  const entries = Object.entries(env)
  if (entries.length > MAX_ENV_VARS) {
    ctx.addIssue({
      code: 'custom',
      path: ['env'],
      message: `has ${entries.length} variables; at most ${MAX_ENV_VARS}; ${SCRIPT_HINT}`,
    })
    return
  }
  let total = 0
  for (const [name, value] of entries) {
    refuseNul(value, ['env', name], ctx)
    const bytes = Buffer.byteLength(name) + 1 + Buffer.byteLength(value)
    total += bytes
    if (bytes > MAX_ARG_BYTES)
      ctx.addIssue({
        code: 'custom',
        path: ['env', name],
        message: `NAME=value is ${bytes} bytes; at most ${MAX_ARG_BYTES}; pass large data as a file or stdin`,
      })
  }
  if (total > MAX_ENV_BYTES)
    ctx.addIssue({
      code: 'custom',
      path: ['env'],
      message: `holds ${total} bytes of NAME=value; at most ${MAX_ENV_BYTES}; pass large data as a file or stdin`,
    })
}

/**
 * The fields of a tool call that become a command's fields when it is routed: the command the
 * default shell routing reads from `arguments` (see `extractShellCommand`) and a `cwd` argument.
 */
export function checkToolArguments(
  name: string,
  args: string | Record<string, unknown>,
  ctx: z.RefinementCtx,
): void {
  const text = typeof args === 'string' ? args : safeStringify(args)
  if (text === undefined) return
  const command = extractShellCommand({ name, arguments: text, callId: 'check', type: 'function' })
  if (command !== undefined) checkCommand(command, ['arguments', 'command'], ctx)
  const cwd = cwdArgument(args)
  if (cwd !== undefined) checkCwd(cwd, ['arguments', 'cwd'], ctx)
}

function cwdArgument(args: string | Record<string, unknown>): string | undefined {
  let v: unknown = args
  if (typeof args === 'string') {
    try {
      v = JSON.parse(args)
    } catch {
      return undefined
    }
  }
  const cwd = v && typeof v === 'object' ? (v as { cwd?: unknown }).cwd : undefined
  return typeof cwd === 'string' ? cwd : undefined
}

/** JSON text of `args`; nesting too deep to serialise is reported by the route itself. */
function safeStringify(args: Record<string, unknown>): string | undefined {
  try {
    return JSON.stringify(args)
  } catch {
    return undefined
  }
}
