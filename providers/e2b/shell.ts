/*
 * The transport of an E2B handle's persistent shell (src/sandbox/shell-runner.ts): one long-lived
 * `bash` started with `commands.run` in the background with stdin kept open, fed one line per
 * command through `sendStdin`; its stdout and stderr stream back on the same call, separately.
 * A timeout or cancel runs the kill helper as a separate command; a shell that ignores it is
 * killed with `commands.kill` (SIGKILL).
 */
import { CommandExitError, type CommandHandle, type Sandbox as E2BSdkSandbox } from 'e2b'
import {
  type AppError,
  type RemoteShell,
  shellInitScript,
  shellKillScript,
  type ShellSink,
  type ShellTransport,
} from '../../src/sandbox/index.js'

/** After SIGTERM to the command's processes, SIGKILL follows this much later (ms). */
const TERM_GRACE_MS = 200

/** What the transport needs from its handle. */
export interface ShellContext {
  sdk: E2BSdkSandbox
  sandboxId: string
  /** The profile's working directory, where a new shell starts. */
  cwd: string
  requestTimeoutMs: number
  helperTimeoutMs: number
  classify(err: unknown, what: string): Promise<AppError>
}

/** A shell process of E2B. */
export interface E2BShellProcess extends RemoteShell {
  handle: CommandHandle
  /** Where the shell's output goes now (the running command), if anywhere. */
  sink: ShellSink | undefined
}

/** The E2B transport of {@link PersistentShellRunner}. */
export function e2bShellTransport(ctx: ShellContext): ShellTransport<E2BShellProcess> {
  const req = { requestTimeoutMs: ctx.requestTimeoutMs }
  const feed = async (shell: E2BShellProcess, text: string): Promise<void> => {
    try {
      await ctx.sdk.commands.sendStdin(shell.pid, text, req)
    } catch (err) {
      shell.alive = false
      throw await ctx.classify(err, `feeding the persistent shell in sandbox ${ctx.sandboxId}`)
    }
  }
  return {
    sandboxId: ctx.sandboxId,
    async start(token) {
      const at: { shell?: E2BShellProcess } = {}
      const handle = await ctx.sdk.commands
        .run('exec bash --noprofile --norc', {
          background: true,
          stdin: true,
          timeoutMs: 0,
          ...req,
          onStdout: (text) => at.shell?.sink?.stdout(text),
          onStderr: (text) => at.shell?.sink?.stderr(text),
        })
        .catch(async (err: unknown) => {
          throw await ctx.classify(err, `starting the persistent shell in sandbox ${ctx.sandboxId}`)
        })
      const started: E2BShellProcess = { handle, pid: handle.pid, token, alive: true, sink: undefined }
      at.shell = started
      const ended = (status: number | undefined): void => {
        started.alive = false
        started.sink?.shellEnded(status)
      }
      handle.wait().then(
        (r) => ended(r.exitCode),
        (err: unknown) => {
          if (err instanceof CommandExitError) return ended(err.exitCode)
          // The stream broke, not the shell: it cannot be reached any more, so it must not linger.
          ended(undefined)
          ctx.sdk.commands.kill(started.pid, req).catch(() => undefined)
        },
      )
      await feed(started, shellInitScript(ctx.cwd))
      return started
    },
    async send(shell, line, sink) {
      shell.sink = sink
      await feed(shell, line)
    },
    async writeStdin(path, data) {
      try {
        await ctx.sdk.files.write(path, new Blob([data]), { useOctetStream: true, ...req })
      } catch (err) {
        throw await ctx.classify(err, `writing the stdin of a command in sandbox ${ctx.sandboxId}`)
      }
    },
    async abortCommand(shell) {
      const r = await ctx.sdk.commands.run(shellKillScript(shell.pid, TERM_GRACE_MS), {
        timeoutMs: ctx.helperTimeoutMs,
        ...req,
      })
      return r.stdout.includes('gone') ? 'gone' : 'ok'
    },
    async killShell(shell) {
      await ctx.sdk.commands.kill(shell.pid, req)
    },
  }
}
