import { z } from 'zod'
import type { ProcessService } from '../services/processes.js'
import { defineTool } from './define-tool.js'
import type { Tool, ToolExecuteContext } from './tool.js'

/**
 * Where the process tools send their calls: the service's process API of a session (the runtime's
 * `processes`, or any object of this shape). Each method answers `undefined` when the session is not
 * the tenant's.
 */
export type ProcessToolBackend = Pick<ProcessService, 'start' | 'list' | 'read' | 'writeStdin' | 'signal'>

/** Options of {@link processTools}. */
export interface ProcessToolsOptions {
  backend: ProcessToolBackend
  /** Tenant when the run has none (library use). @default 'default' */
  tenant?: string
  /** Session when the run has none. @default the run's `sessionId` (required one way or the other) */
  sessionId?: string
  /** Bytes of each stream one read returns at most. @default 65536 */
  maxReadBytes?: number
}

const id = z.string().regex(/^[A-Za-z0-9_-]{1,64}$/, 'a process id as start_process answered it (p-…)')

/** Why a call could not reach a session (thrown: the model gets it as the tool's error). */
class ProcessToolError extends Error {
  override readonly name = 'ProcessToolError'
}

/**
 * Tools for background processes in the run's session sandbox, next to the shell tool:
 * `start_process`, `list_processes`, `read_process_output` (from byte offsets, optionally waiting
 * for new output), `write_process_stdin` and `kill_process`. They run on the host (they call
 * `backend`, which reaches the sandbox), so no routing interceptor is needed; the run needs a
 * `sessionId` (or `options.sessionId`), since processes live in a session's sandbox.
 *
 * @example
 * createAgent({ model, tools: [shellTool(), ...processTools({ backend: runtime.processes })], ... })
 */
export function processTools(options: ProcessToolsOptions): Tool[] {
  const { backend } = options
  const maxBytes = options.maxReadBytes ?? 65_536
  const where = (ctx: ToolExecuteContext): { tenant: string; session: string } => {
    const session = ctx.sessionId ?? options.sessionId
    if (!session)
      throw new ProcessToolError(
        'background processes live in a session: run the agent with a sessionId (or pass processTools({ sessionId }))',
      )
    return { tenant: ctx.tenant ?? options.tenant ?? 'default', session }
  }
  const found = <T>(session: string, v: T | undefined): T => {
    if (v === undefined) throw new ProcessToolError(`no session ${session}`)
    return v
  }
  return [
    defineTool({
      name: 'start_process',
      description:
        'Start a command that keeps running after this call (a server, a watcher, a long build) in the sandbox. ' +
        'Returns its id; read its output with read_process_output, stop it with kill_process.',
      parameters: z.object({
        command: z.string().min(1).describe('The shell command (bash -c), e.g. python3 -m http.server 8000'),
        cwd: z
          .string()
          .startsWith('/')
          .optional()
          .describe('Absolute working directory (default /workspace)'),
      }),
      execute: async ({ command, cwd }, ctx) => {
        const { tenant, session } = where(ctx)
        return found(session, await backend.start(tenant, session, { command, ...(cwd ? { cwd } : {}) }))
      },
    }),
    defineTool({
      name: 'list_processes',
      description:
        'List the background processes of this session: id, command, pid, state, exit code or signal.',
      parameters: z.object({}),
      execute: async (_args, ctx) => {
        const { tenant, session } = where(ctx)
        return found(session, await backend.list(tenant, session))
      },
    }),
    defineTool({
      name: 'read_process_output',
      description:
        'Read stdout and stderr of a background process from byte offsets (0 at first, then the nextStdoutOffset / ' +
        'nextStderrOffset of the previous read). Only the last part of a long output is kept: dropped*Bytes ' +
        'says how much was lost before the text returned.',
      parameters: z.object({
        id,
        stdoutOffset: z.number().int().min(0).optional(),
        stderrOffset: z.number().int().min(0).optional(),
        waitMs: z
          .number()
          .int()
          .min(0)
          .max(20_000)
          .optional()
          .describe('Wait up to this long for new output or the end'),
      }),
      execute: async ({ id: pid, stdoutOffset, stderrOffset, waitMs }, ctx) => {
        const { tenant, session } = where(ctx)
        const o = found(
          session,
          await backend.read(tenant, session, pid, {
            stdoutOffset: stdoutOffset ?? 0,
            stderrOffset: stderrOffset ?? 0,
            maxBytes,
            waitMs: waitMs ?? 0,
          }),
        )
        return {
          process: o.process,
          stdout: o.stdout.data,
          stderr: o.stderr.data,
          nextStdoutOffset: o.stdout.nextOffset,
          nextStderrOffset: o.stderr.nextOffset,
          droppedStdoutBytes: o.stdout.dropped,
          droppedStderrBytes: o.stderr.dropped,
        }
      },
    }),
    defineTool({
      name: 'write_process_stdin',
      description:
        'Write text to the stdin of a background process; with close: true, close its stdin after it.',
      parameters: z.object({ id, data: z.string(), close: z.boolean().optional() }),
      execute: async ({ id: pid, data, close }, ctx) => {
        const { tenant, session } = where(ctx)
        return found(
          session,
          await backend.writeStdin(tenant, session, pid, new TextEncoder().encode(data), close ?? false),
        )
      },
    }),
    defineTool({
      name: 'kill_process',
      description:
        'Send a signal (default SIGKILL) to a background process and everything it started; answers its state.',
      parameters: z.object({
        id,
        signal: z.string().optional().describe('e.g. SIGTERM, SIGINT; default SIGKILL'),
      }),
      execute: async ({ id: pid, signal }, ctx) => {
        const { tenant, session } = where(ctx)
        return found(session, await backend.signal(tenant, session, pid, signal ?? 'SIGKILL', 1_000))
      },
    }),
  ]
}
