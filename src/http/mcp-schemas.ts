import { z } from 'zod'
import { checkCommand, checkCwd } from '../services/input-limits.js'

/** What the MCP tools tell the model about the shell profile they run in. */
export interface McpShellProfile {
  readonly name: string
  /** A `bash` call without `timeoutMs` runs this long at most (ms). */
  readonly defaultTimeoutMs: number
  /** The largest `timeoutMs` a call may ask for (ms). */
  readonly maxTimeoutMs: number
  readonly network?: string
  /**
   * The shell `bash` calls run in: `persistent` (one long-lived shell per session keeps cwd and
   * variables) or `fresh` (a new `bash -c` per call). @default unknown: the instructions hedge
   */
  readonly shell?: 'persistent' | 'fresh'
  /** The per-stream output cap of a `bash` result (bytes). */
  readonly outputCapBytes?: number
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

/** How file content travels in a tool call: `utf8` text, or `base64` for any bytes. */
const encoding = (what: string) =>
  z
    .enum(['utf8', 'base64'])
    .nullish()
    .describe(`${what}; null for utf8. Use base64 for binary files (images, archives, compiled code).`)

/** The arguments of `read_file`. */
export const readFileArgs = strictArgs('read_file', {
  path: nonEmpty('path').describe('File path (relative to /workspace, or absolute).'),
  encoding: encoding('utf8 returns the text; base64 returns the bytes base64-encoded'),
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
  content: z.string().describe('The whole new content: text, or base64 when encoding is base64.'),
  encoding: encoding('how content is encoded: utf8 text, or base64 bytes'),
})

/** The arguments of `edit_file`. */
export const editFileArgs = strictArgs('edit_file', {
  path: nonEmpty('path').describe('File path (relative to /workspace, or absolute).'),
  oldText: nonEmpty('oldText').describe('Exact text to replace; it must occur exactly once in the file.'),
  newText: z.string().describe('The replacement text.'),
})

/** The arguments of `list_sessions` (none). */
export const noArgs = (tool: string) => strictArgs(tool, {})

/** The server instructions: how a session works (its sandbox, shell, files, timeouts, output cap, expiry). */
export function mcpInstructions(opts: { idleMs: number; profile?: McpShellProfile }): string {
  const { profile } = opts
  const minutes = Math.max(1, Math.round(opts.idleMs / 60_000))
  const idle = opts.idleMs < 60_000 ? `${Math.round(opts.idleMs / 1000)} s` : `${minutes} min`
  const shell =
    profile?.shell === 'persistent'
      ? [
          'Persistent shell state: the bash calls of this session run one after another in one long-lived bash, so `cd`, exported variables, functions, aliases and an activated virtualenv stay for later calls (`cd src` in one call, `pytest` in the next works).',
          'A result that says [shell restarted: …] means that state is gone (the shell exited or was killed); files stay. Calls of one session are queued, never interleaved.',
        ]
      : profile?.shell === 'fresh'
        ? [
            'No shell state carries over: each bash call runs in a new bash, so the working directory and exported variables of one call are gone in the next; pass `cwd` or use `cd dir && cmd` in one call.',
          ]
        : [
            'Whether shell state (working directory, exported variables) carries over between bash calls depends on the server\u2019s shell mode: do not rely on it unless a bash result shows it; `cwd` or `cd dir && cmd` in one call always works.',
          ]
  const cap = profile?.outputCapBytes
  return [
    'Each MCP session has its own sandbox (a Linux container); nothing runs on the server host. One MCP session is one sandbox session: a new MCP session starts with an empty workspace.',
    ...shell,
    'Files persist within the session: /workspace is the default working directory and everything written there stays for later calls. read_file reads UTF-8 text, whole or lines startLine..endLine; a binary file needs encoding: "base64". write_file writes a whole file (encoding: "base64" for bytes). edit_file replaces one exact occurrence of a text.',
    profile
      ? `A bash call is killed after timeoutMs (default ${profile.defaultTimeoutMs} ms, at most ${profile.maxTimeoutMs} ms); cancelling a call kills its command. The session stays.`
      : 'A bash call is killed after its timeoutMs; cancelling a call kills its command. The session stays.',
    cap
      ? `stdout and stderr are each capped at ${cap} bytes; past it the result says [output truncated at the output cap]. Send long output to a file and read parts of it (read_file line ranges, grep, tail).`
      : 'stdout and stderr are capped; past the cap the result says [output truncated at the output cap]. Send long output to a file and read parts of it (read_file line ranges, grep, tail).',
    `The session and its files are deleted when the client closes it, or after ${idle} without a request; then initialize a new session.`,
    'Send a progressToken to receive the command\u2019s output live as progress notifications.',
    'For a server or anything that should keep running, use start_process (then read_process_output, write_process_stdin, kill_process) instead of `&` in bash; background processes end with the session.',
    ...(profile?.network === 'none' ? ['The sandbox has no network access.'] : []),
    ...(profile?.network?.startsWith('allow: ')
      ? [
          `The sandbox reaches only these destinations, through the HTTP proxy in HTTP_PROXY / HTTPS_PROXY (${profile.network.slice(7)}); a refused one answers 403 with the reason.`,
        ]
      : []),
  ].join('\n')
}
