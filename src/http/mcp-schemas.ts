import { z } from 'zod'
import { checkCommand, checkCwd } from './input-limits.js'

/** What the MCP tools tell the model about the shell profile they run in. */
export interface McpShellProfile {
  readonly name: string
  /** A `bash` call without `timeoutMs` runs this long at most (ms). */
  readonly defaultTimeoutMs: number
  /** The largest `timeoutMs` a call may ask for (ms). */
  readonly maxTimeoutMs: number
  readonly network?: 'none' | 'bridge'
}

/**
 * A tool's arguments as a strict-mode schema (OpenAI `strict: true`, the AI SDK's strict tools): every
 * property is listed in `required` and optional ones are nullable, so a strict client sends `null` for
 * "absent" (accepted as absent); a non-strict client may still omit them. An unknown argument is a tool
 * error naming it and the arguments the tool takes, instead of being silently dropped.
 */
export function strictArgs<S extends z.ZodRawShape>(tool: string, shape: S) {
  const names = Object.keys(shape)
  return z
    .strictObject(shape, {
      error: (issue) =>
        issue.code === 'unrecognized_keys'
          ? `unknown argument${issue.keys.length === 1 ? '' : 's'} ${issue.keys.map((k) => JSON.stringify(k)).join(', ')}; ` +
            `${tool} takes ${names.length ? names.join(', ') : 'no arguments'}`
          : undefined,
    })
    .meta({ required: names })
}

/** A non-empty string (checked by refinement: strict mode may not accept `minLength`). */
const nonEmpty = (what: string) =>
  z.string().superRefine((v, ctx) => {
    if (v.length === 0) ctx.addIssue({ code: 'custom', message: `${what} must not be empty` })
  })

/** The arguments of `bash`. */
export function bashArgs(profile: McpShellProfile | undefined) {
  return strictArgs('bash', {
    command: nonEmpty('command')
      .superRefine((v, ctx) => checkCommand(v, [], ctx))
      .describe('The shell command (bash -c).'),
    cwd: z
      .string()
      .superRefine((v, ctx) => {
        checkCwd(v, [], ctx)
        if (!v.startsWith('/'))
          ctx.addIssue({ code: 'custom', message: 'cwd must be an absolute path, e.g. /workspace/src' })
      })
      .nullish()
      .describe('Absolute working directory; null for /workspace.'),
    timeoutMs: z
      .number()
      .int()
      .positive()
      .nullish()
      .describe(
        profile
          ? `Kill the command after this many ms; null for ${profile.defaultTimeoutMs}; at most ${profile.maxTimeoutMs}.`
          : 'Kill the command after this many ms; null for the profile default.',
      ),
  })
}

/** The arguments of `read_file`. */
export const readFileArgs = strictArgs('read_file', {
  path: nonEmpty('path').describe('File path (relative to /workspace, or absolute).'),
  startLine: z.number().int().positive().nullish().describe('First line to return (1-based); null for 1.'),
  endLine: z
    .number()
    .int()
    .positive()
    .nullish()
    .describe('Last line to return (inclusive); null for the end.'),
})

/** The arguments of `write_file`. */
export const writeFileArgs = strictArgs('write_file', {
  path: nonEmpty('path').describe('File path (relative to /workspace, or absolute).'),
  content: z.string().describe('The whole new content (UTF-8).'),
})

/** The arguments of `edit_file`. */
export const editFileArgs = strictArgs('edit_file', {
  path: nonEmpty('path').describe('File path (relative to /workspace, or absolute).'),
  oldText: nonEmpty('oldText').describe('Exact text to replace; it must occur exactly once in the file.'),
  newText: z.string().describe('The replacement text.'),
})

/** The arguments of `list_sessions` (none). */
export const noArgs = (tool: string) => strictArgs(tool, {})

/** The server instructions: how a session works, true whichever shell mode the server runs. */
export function mcpInstructions(opts: { idleMs: number; profile?: McpShellProfile }): string {
  const { profile } = opts
  const minutes = Math.max(1, Math.round(opts.idleMs / 60_000))
  return [
    'Each MCP session has its own sandbox (a Linux container); nothing runs on the server host.',
    'Files persist within the session: /workspace is the default working directory and everything written there stays for later calls (bash, read_file, write_file, edit_file).',
    `The session and its files are deleted when the client closes it, or after ${opts.idleMs < 60_000 ? `${Math.round(opts.idleMs / 1000)} s` : `${minutes} min`} without a request; then initialize a new session.`,
    'Whether shell state (working directory, exported variables, background jobs) carries over between bash calls depends on the server\u2019s shell mode: do not rely on it unless a bash result shows it; `cwd` or `cd dir && cmd` in one call always works.',
    profile
      ? `A bash call is killed after timeoutMs (default ${profile.defaultTimeoutMs} ms, at most ${profile.maxTimeoutMs} ms); cancelling a call kills its command.`
      : 'A bash call is killed after its timeoutMs; cancelling a call kills its command.',
    'Send a progressToken to receive the command\u2019s output live as progress notifications.',
    'For a server or anything that should keep running, use start_process (then read_process_output, write_process_stdin, kill_process) instead of `&` in bash; background processes end with the session.',
    ...(profile?.network === 'none' ? ['The sandbox has no network access.'] : []),
  ].join('\n')
}
