/*
 * The persistent shell of an E2B handle: one long-lived `bash` started with `commands.run` in the
 * background with stdin kept open, fed one line per command through `sendStdin` (the scheme of
 * src/sandbox/shell-script.ts: end markers on stdout and stderr, SIGUSR1 plus a helper that kills
 * the shell's descendants at a timeout or cancel).
 */
import { randomBytes } from 'node:crypto'
import { CommandExitError, type CommandHandle, type Sandbox as E2BSdkSandbox } from 'e2b'
import { AppError } from '../../src/errors.js'
import type { ResolvedExec } from '../../src/sandbox/exec-request.js'
import { Semaphore } from '../../src/sandbox/semaphore.js'
import {
  type ShellMark,
  ShellMarkerScanner,
  parseShellMark,
  shellCommandLine,
  shellInitScript,
  shellKillScript,
  shellMarkers,
} from '../../src/sandbox/shell-script.js'
import type { ExecOptions, ExecResult } from '../../src/sandbox/types.js'
import { CappedSink } from './output.js'

/** After SIGTERM to the command's processes, SIGKILL follows this much later (ms). */
const TERM_GRACE_MS = 200
/** A command that ignores the kill is the shell itself (a builtin loop): the shell goes this much later (ms). */
const SHELL_KILL_MS = 1000

/** What the shell needs from its handle. */
export interface ShellContext {
  sdk: E2BSdkSandbox
  sandboxId: string
  /** The profile's working directory, where a new shell starts. */
  cwd: string
  requestTimeoutMs: number
  helperTimeoutMs: number
  classify(err: unknown, what: string): Promise<AppError>
}

/** A command of {@link E2BShell.run}: resolved, plus whether its cwd was asked for (then it is a `cd` that stays). */
export interface ShellRun extends ResolvedExec {
  cwdGiven: boolean
}

interface LiveShell {
  handle: CommandHandle
  pid: number
  token: string
  alive: boolean
}

/** The command the shell is running: where its output goes. */
interface Current {
  stdout: (text: string) => void
  stderr: (text: string) => void
  shellEnded: (status: number | undefined) => void
}

/** One handle's persistent shell; calls run one after another. */
export class E2BShell {
  private shell: LiveShell | undefined
  private startedBefore = false
  private current: Current | undefined
  private readonly turn = new Semaphore(1)

  constructor(private readonly ctx: ShellContext) {}

  private async start(): Promise<LiveShell> {
    const token = randomBytes(8).toString('hex')
    const handle = await this.ctx.sdk.commands
      .run('exec bash --noprofile --norc', {
        background: true,
        stdin: true,
        timeoutMs: 0,
        requestTimeoutMs: this.ctx.requestTimeoutMs,
        onStdout: (text) => this.current?.stdout(text),
        onStderr: (text) => this.current?.stderr(text),
      })
      .catch(async (err: unknown) => {
        throw await this.ctx.classify(err, `starting the persistent shell in sandbox ${this.ctx.sandboxId}`)
      })
    const live: LiveShell = { handle, pid: handle.pid, token, alive: true }
    handle.wait().then(
      (r) => this.ended(live, r.exitCode),
      (err: unknown) => this.ended(live, err instanceof CommandExitError ? err.exitCode : undefined),
    )
    await this.send(live, shellInitScript(this.ctx.cwd))
    return live
  }

  private ended(live: LiveShell, status: number | undefined): void {
    live.alive = false
    if (this.shell === live) this.shell = undefined
    this.current?.shellEnded(status)
  }

  private async send(live: LiveShell, text: string): Promise<void> {
    try {
      await this.ctx.sdk.commands.sendStdin(live.pid, text, { requestTimeoutMs: this.ctx.requestTimeoutMs })
    } catch (err) {
      live.alive = false
      throw await this.ctx.classify(err, `feeding the persistent shell in sandbox ${this.ctx.sandboxId}`)
    }
  }

  /** Kills what the shell runs; when the command is the shell itself, the shell goes too. */
  private async abort(live: LiveShell, done: Promise<unknown>): Promise<void> {
    const script = shellKillScript(live.pid, TERM_GRACE_MS)
    await this.ctx.sdk.commands
      .run(script, { timeoutMs: this.ctx.helperTimeoutMs, requestTimeoutMs: this.ctx.requestTimeoutMs })
      .catch(() => undefined)
    let timer: NodeJS.Timeout | undefined
    const late = new Promise<'late'>((resolve) => (timer = setTimeout(() => resolve('late'), SHELL_KILL_MS)))
    const first = await Promise.race([done.then(() => 'done' as const), late])
    clearTimeout(timer)
    if (first === 'late' && live.alive) {
      await this.ctx.sdk.commands
        .kill(live.pid, { requestTimeoutMs: this.ctx.requestTimeoutMs })
        .catch(() => undefined)
    }
  }

  /** Runs one command in the shell (starting one first when there is none). */
  async run(req: ShellRun, opts: ExecOptions): Promise<{ result: Promise<ExecResult>; settled: Promise<void> }> {
    const release = await this.turn.acquire(opts.signal)
    const started = performance.now()
    let settle!: () => void
    const settled = new Promise<void>((resolve) => (settle = resolve))
    void settled.then(release)
    try {
      const fresh = !this.shell?.alive
      const live = fresh ? await this.start() : this.shell!
      const firstShell = fresh && !this.startedBefore
      if (fresh) this.startedBefore = true
      this.shell = live
      const result = this.runIn(live, req, opts, { started, fresh, firstShell })
      void result.then(settle, settle)
      return { result, settled }
    } catch (err) {
      settle()
      throw err
    }
  }

  private async runIn(
    live: LiveShell,
    req: ShellRun,
    opts: ExecOptions,
    at: { started: number; fresh: boolean; firstShell: boolean },
  ): Promise<ExecResult> {
    const nonce = randomBytes(12).toString('hex')
    const markers = shellMarkers(nonce)
    const scanOut = new ShellMarkerScanner(markers.stdout)
    const scanErr = new ShellMarkerScanner(markers.stderr)
    const stdout = new CappedSink(req.outputCapBytes, opts.onStdout)
    const stderr = new CappedSink(req.outputCapBytes, opts.onStderr)
    let stdinPath: string | undefined
    if (req.stdin.length > 0) {
      stdinPath = `/tmp/.sbx-stdin-${nonce}`
      try {
        await this.ctx.sdk.files.write(stdinPath, new Blob([req.stdin]), {
          useOctetStream: true,
          requestTimeoutMs: this.ctx.requestTimeoutMs,
        })
      } catch (err) {
        throw await this.ctx.classify(err, `writing the stdin of a command in sandbox ${this.ctx.sandboxId}`)
      }
    }
    let finish!: (how: { status?: number | undefined; mark?: ShellMark }) => void
    const done = new Promise<{ status?: number | undefined; mark?: ShellMark }>((resolve) => (finish = resolve))
    const check = (): void => {
      if (scanOut.found !== undefined && scanErr.found !== undefined) {
        const mark = parseShellMark(scanOut.found)
        finish(mark ? { status: mark.status, mark } : {})
      }
    }
    const guard = (deliver: () => void): void => {
      try {
        deliver()
      } catch {
        // A throwing live callback does not stop the shell; the output is still collected.
      }
    }
    this.current = {
      stdout: (text) => {
        guard(() => stdout.push(scanOut.push(text)))
        check()
      },
      stderr: (text) => {
        guard(() => stderr.push(scanErr.push(text)))
        check()
      },
      shellEnded: (status) => {
        guard(() => stdout.push(scanOut.flush()))
        guard(() => stderr.push(scanErr.flush()))
        finish({ status })
      },
    }
    let timedOut = false
    const signal = opts.signal
    let aborting: Promise<void> | undefined
    const abort = (): void => {
      aborting ??= this.abort(live, done)
    }
    const timer = setTimeout(() => {
      timedOut = true
      abort()
    }, req.timeoutMs)
    signal?.addEventListener('abort', abort, { once: true })
    try {
      await this.send(
        live,
        shellCommandLine({
          nonce,
          command: req.command,
          ...(req.cwdGiven ? { cwd: req.cwd } : {}),
          env: req.env,
          ...(stdinPath ? { stdinPath } : {}),
          token: live.token,
          firstShell: at.firstShell,
        }),
      )
      const how = await done
      await aborting
      if (how.mark?.ended || !live.alive) live.alive = false
      if (how.mark?.status === -1 && !how.mark.ended) {
        throw new AppError(
          'BAD_REQUEST',
          `cannot use working directory ${req.cwd} in sandbox ${this.ctx.sandboxId}; create it first or pass an existing cwd`,
        )
      }
      return {
        ...(timedOut
          ? { exitCode: null, signal: 'SIGKILL' }
          : { exitCode: how.status ?? null, ...(how.status === undefined ? { signal: 'SIGKILL' } : {}) }),
        stdout: stdout.finish(),
        stderr: stderr.finish(),
        timedOut,
        truncated: stdout.truncated || stderr.truncated,
        durationMs: Math.round(performance.now() - at.started),
        sandboxId: this.ctx.sandboxId,
        shellRestarted: how.mark ? !how.mark.continuous : at.fresh && !at.firstShell,
      }
    } finally {
      clearTimeout(timer)
      signal?.removeEventListener('abort', abort)
      this.current = undefined
    }
  }

  /** Ends the shell (best effort). */
  async close(): Promise<void> {
    const live = this.shell
    this.shell = undefined
    if (live?.alive) {
      live.alive = false
      await this.ctx.sdk.commands
        .kill(live.pid, { requestTimeoutMs: this.ctx.requestTimeoutMs })
        .catch(() => undefined)
    }
  }
}
