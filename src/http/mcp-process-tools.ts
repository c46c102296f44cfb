import type { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js'
import { z } from 'zod'
import { AppError } from '../errors.js'
import type { ProcessService } from '../services/index.js'
import { checkCommand, checkCwd } from '../services/input-limits.js'
import { text, type TextResult } from './mcp-file-tools.js'
import { noArgs, strictArgs } from './mcp-schemas.js'

/** What the process tools need: the process service, the tenant, and the MCP session's sandbox session. */
export interface McpProcessToolsContext {
  readonly processes: ProcessService
  readonly tenant: string
  /** The sandbox session of this MCP session (throws before initialization). */
  readonly session: () => string
  /** Marks the MCP session busy while `run` runs (it does not expire meanwhile). */
  readonly busy: <T>(run: () => Promise<T>) => Promise<T>
}

const processId = z
  .string()
  .regex(/^[A-Za-z0-9_-]{1,64}$/, 'a process id as start_process answered it (p-…)')
  .describe('The process id start_process answered (p-…).')
const offset = (stream: string) =>
  z
    .number()
    .int()
    .min(0)
    .nullish()
    .describe(
      `Byte offset in ${stream}: the next${stream === 'stdout' ? 'Stdout' : 'Stderr'}Offset of the previous read; null for 0.`,
    )

const startArgs = strictArgs('start_process', {
  command: z
    .string()
    .superRefine((v, ctx) => {
      if (!v.trim()) ctx.addIssue({ code: 'custom', message: 'command must not be empty' })
      checkCommand(v, [], ctx)
    })
    .describe('The shell command (bash -c), e.g. a server: python3 -m http.server 8000.'),
  cwd: z
    .string()
    .superRefine((v, ctx) => {
      checkCwd(v, [], ctx)
      if (!v.startsWith('/')) ctx.addIssue({ code: 'custom', message: 'cwd must be an absolute path' })
    })
    .nullish()
    .describe('Absolute working directory; null for /workspace.'),
})
const readArgs = strictArgs('read_process_output', {
  id: processId,
  stdoutOffset: offset('stdout'),
  stderrOffset: offset('stderr'),
  waitMs: z
    .number()
    .int()
    .min(0)
    .max(20_000)
    .nullish()
    .describe('Wait up to this long (ms, at most 20000) for new output or the end; null for no wait.'),
})
const stdinArgs = strictArgs('write_process_stdin', {
  id: processId,
  data: z
    .string()
    .superRefine((v, ctx) => {
      if (v.length > 1_000_000)
        ctx.addIssue({ code: 'custom', message: 'data over 1000000 characters; write it in parts' })
    })
    .describe('Text to write to its stdin (add "\\n" to end a line).'),
  close: z.boolean().nullish().describe('Close stdin afterwards (the process reads EOF); null for false.'),
})
const killArgs = strictArgs('kill_process', {
  id: processId,
  signal: z
    .string()
    .regex(/^(SIG)?[A-Z0-9+-]{2,12}$/i, 'a signal name such as SIGTERM')
    .nullish()
    .describe('Signal name, e.g. SIGTERM or SIGINT; null for SIGKILL. It reaches the whole process group.'),
})

/** Runs a tool body; an `AppError` (or an unknown session) becomes a tool error the model can act on. */
async function guarded<T>(
  run: () => Promise<T | undefined>,
  render: (value: T) => string,
): Promise<TextResult> {
  try {
    const value = await run()
    if (value === undefined) return text('this MCP session has no sandbox session (it was deleted)', true)
    return text(render(value))
  } catch (err) {
    if (err instanceof AppError) return text(`${err.code}: ${err.message}`, true)
    throw err
  }
}

/**
 * Registers `start_process`, `list_processes`, `read_process_output`, `write_process_stdin` and
 * `kill_process` on `server`: background processes of the MCP session's sandbox (they end with it).
 */
export function registerProcessTools(server: McpServer, ctx: McpProcessToolsContext): void {
  const { processes, tenant, session, busy } = ctx
  const json = (v: unknown): string => JSON.stringify(v)
  server.registerTool(
    'start_process',
    {
      title: 'Start a background process',
      description:
        'Start a command that keeps running after this call (a server, a watcher, a long build) in the sandbox. ' +
        'Returns its id; read its output with read_process_output, stop it with kill_process.',
      inputSchema: startArgs,
      annotations: { destructiveHint: true, openWorldHint: false },
    },
    async ({ command, cwd }) =>
      busy(() =>
        guarded(
          () => processes.start(tenant, session(), { command, ...(cwd ? { cwd } : {}) }),
          (p) => json(p),
        ),
      ),
  )
  server.registerTool(
    'list_processes',
    {
      title: 'List background processes',
      description:
        'List the background processes of this session: id, command, pid, state, exit code or signal.',
      inputSchema: noArgs('list_processes'),
      annotations: { readOnlyHint: true },
    },
    async () =>
      busy(() =>
        guarded(
          () => processes.list(tenant, session()),
          (ps) => json(ps),
        ),
      ),
  )
  server.registerTool(
    'read_process_output',
    {
      title: 'Read a background process’s output',
      description:
        'Read stdout and stderr of a background process from byte offsets. The answer gives the process state, ' +
        'the text, nextStdoutOffset / nextStderrOffset to pass next time, and how many bytes were dropped ' +
        '(only the last part of a long output is kept).',
      inputSchema: readArgs,
      annotations: { readOnlyHint: true },
    },
    async ({ id, stdoutOffset, stderrOffset, waitMs }) =>
      busy(() =>
        guarded(
          () =>
            processes.read(tenant, session(), id, {
              stdoutOffset: stdoutOffset ?? 0,
              stderrOffset: stderrOffset ?? 0,
              maxBytes: 65_536,
              waitMs: waitMs ?? 0,
            }),
          (o) =>
            json({
              process: o.process,
              stdout: o.stdout.data,
              stderr: o.stderr.data,
              nextStdoutOffset: o.stdout.nextOffset,
              nextStderrOffset: o.stderr.nextOffset,
              droppedStdoutBytes: o.stdout.dropped,
              droppedStderrBytes: o.stderr.dropped,
            }),
        ),
      ),
  )
  server.registerTool(
    'write_process_stdin',
    {
      title: 'Write to a background process’s stdin',
      description:
        'Write text to the stdin of a background process; with close: true, close its stdin after it.',
      inputSchema: stdinArgs,
      annotations: { destructiveHint: true },
    },
    async ({ id, data, close }) =>
      busy(() =>
        guarded(
          () => processes.writeStdin(tenant, session(), id, new TextEncoder().encode(data), close ?? false),
          (r) => json(r),
        ),
      ),
  )
  server.registerTool(
    'kill_process',
    {
      title: 'Kill a background process',
      description:
        'Send a signal (default SIGKILL) to a background process and everything it started; answers its state ' +
        'after up to 1 s. Its output stays readable.',
      inputSchema: killArgs,
      annotations: { destructiveHint: true },
    },
    async ({ id, signal }) =>
      busy(() =>
        guarded(
          () => processes.signal(tenant, session(), id, signal ?? 'SIGKILL', 1_000),
          (p) => json(p),
        ),
      ),
  )
}
