/*
 * The provider-independent half of a remote persistent shell: one shell per handle, calls queued
 * one after another, each command's end found by its markers (see shell-script.ts), a timeout or
 * cancel that aborts the command and keeps the shell (or, when the command is the shell itself,
 * kills the shell), and `shellRestarted` reported from the owner file. A provider supplies the
 * transport: how a shell starts, how a line reaches it, how output comes back, how to kill.
 */
import { randomBytes } from 'node:crypto'
import { AppError } from '../errors.js'
import { HeadTailSink, outputSplit } from './output-cap.js'
import type { ResolvedExec } from './exec-request.js'
import { Semaphore } from './semaphore.js'
import {
  type ShellMark,
  ShellMarkerScanner,
  parseShellMark,
  shellCommandLine,
  shellMarkers,
} from './shell-script.js'
import type { ExecOptions, ExecResult } from './types.js'

/** After the helper's kill, how long the command may take to reach its end marker before the shell goes (ms). */
const SHELL_KILL_MS = 1000

/** A running shell as its transport knows it. */
export interface RemoteShell {
  /** Pid of the shell inside the sandbox. */
  pid: number
  /** Token this shell writes to the owner file. */
  token: string
  alive: boolean
}

/** Where one command's output and end go; the transport calls these. */
export interface ShellSink {
  stdout(text: string): void
  stderr(text: string): void
  /** The shell ended (its status when known); the command is over. */
  shellEnded(status: number | undefined): void
  /** The transport cannot reach the shell any more: the command fails with `err`. */
  failed(err: AppError): void
  /** Whether the command is over (a poller stops then). */
  readonly done: boolean
}

/** What a provider supplies to {@link PersistentShellRunner}. */
export interface ShellTransport<S extends RemoteShell> {
  /** Starts a shell in the profile cwd, fed {@link shellInitScript} already. */
  start(token: string): Promise<S>
  /** Hands `line` (one command, see {@link shellCommandLine}) to the shell; output goes to `sink`. */
  send(shell: S, line: string, sink: ShellSink): Promise<void>
  /** Writes a command's stdin to a file in the sandbox. */
  writeStdin(path: string, data: Uint8Array): Promise<void>
  /** Runs the kill helper ({@link shellKillScript}) for the shell's current command; `gone` when the shell is. */
  abortCommand(shell: S): Promise<'gone' | 'ok'>
  /** Ends the shell itself (the command ignored the kill, or the handle closes). */
  killShell(shell: S): Promise<void>
  /** Text for errors. */
  sandboxId: string
  /** Text put into every command line before the command (see {@link ShellLine.prelude}). */
  linePrelude?: string
  /**
   * Whether each command's output is capped inside the sandbox (see {@link ShellLine.cap}): for a
   * transport that reads the shell's output again and again (Daytona's logs), so a flood never
   * reaches it.
   */
  capsInSandbox?: boolean
}

/** One command for {@link PersistentShellRunner.run}: resolved, plus whether a cwd was asked for (a `cd` that stays). */
export interface ShellCommand extends ResolvedExec {
  cwdGiven: boolean
}

/** A command in flight: its result, and when the shell is free again. */
export interface ShellCall {
  result: Promise<ExecResult>
  settled: Promise<void>
}

/** One handle's persistent shell over a provider's transport. */
export class PersistentShellRunner<S extends RemoteShell> {
  private shell: S | undefined
  private startedBefore = false
  private readonly turn = new Semaphore(1)

  constructor(private readonly transport: ShellTransport<S>) {}

  /** Runs one command (after the calls before it), starting a shell first when there is none. */
  async run(cmd: ShellCommand, opts: ExecOptions): Promise<ShellCall> {
    const release = await this.turn.acquire(opts.signal)
    const started = performance.now()
    try {
      const fresh = !this.shell?.alive
      const shell = fresh ? await this.transport.start(randomBytes(8).toString('hex')) : this.shell!
      const firstShell = fresh && !this.startedBefore
      if (fresh) this.startedBefore = true
      this.shell = shell
      const result = this.runIn(shell, cmd, opts, { started, fresh, firstShell })
      const settled = result.then(
        () => undefined,
        () => undefined,
      )
      void settled.then(release)
      return { result, settled }
    } catch (err) {
      release()
      throw err
    }
  }

  private async runIn(
    shell: S,
    cmd: ShellCommand,
    opts: ExecOptions,
    at: { started: number; fresh: boolean; firstShell: boolean },
  ): Promise<ExecResult> {
    const t = this.transport
    const nonce = randomBytes(12).toString('hex')
    const markers = shellMarkers(nonce)
    const scanOut = new ShellMarkerScanner(markers.stdout)
    const scanErr = new ShellMarkerScanner(markers.stderr)
    const stdout = new HeadTailSink(cmd.outputCapBytes, opts.onStdout)
    const stderr = new HeadTailSink(cmd.outputCapBytes, opts.onStderr)
    let stdinPath: string | undefined
    if (cmd.stdin.length > 0) {
      stdinPath = `/tmp/.sbx-stdin-${nonce}`
      await t.writeStdin(stdinPath, cmd.stdin)
    }
    type End = { status?: number | undefined; mark?: ShellMark }
    let finish!: (end: End) => void
    let fail!: (err: AppError) => void
    let over = false
    const ended = new Promise<End>((resolve, reject) => ((finish = resolve), (fail = reject)))
    ended.catch(() => undefined)
    const check = (): void => {
      if (scanOut.found === undefined || scanErr.found === undefined) return
      over = true
      const mark = parseShellMark(scanOut.found)
      finish(mark ? { status: mark.status, mark } : {})
    }
    /** A throwing live callback does not stop the shell; the output is still collected. */
    const guard = (deliver: () => void): void => {
      try {
        deliver()
      } catch {
        // ignored on purpose
      }
    }
    const sink: ShellSink = {
      stdout: (text) => {
        guard(() => stdout.push(scanOut.push(text)))
        check()
      },
      stderr: (text) => {
        guard(() => stderr.push(scanErr.push(text)))
        check()
      },
      shellEnded: (status) => {
        shell.alive = false
        guard(() => stdout.push(scanOut.flush()))
        guard(() => stderr.push(scanErr.flush()))
        over = true
        finish({ status })
      },
      failed: (err) => {
        over = true
        fail(err)
      },
      get done() {
        return over
      },
    }
    let timedOut = false
    let aborting: Promise<void> | undefined
    const abort = (): void => {
      aborting ??= this.abort(shell, ended, () => sink.shellEnded(undefined))
    }
    const timer = setTimeout(() => {
      timedOut = true
      abort()
    }, cmd.timeoutMs)
    opts.signal?.addEventListener('abort', abort, { once: true })
    try {
      const line = shellCommandLine({
        nonce,
        command: cmd.command,
        ...(cmd.cwdGiven ? { cwd: cmd.cwd } : {}),
        env: cmd.env,
        ...(stdinPath ? { stdinPath } : {}),
        token: shell.token,
        firstShell: at.firstShell,
        ...(t.linePrelude ? { prelude: t.linePrelude } : {}),
        ...(t.capsInSandbox ? { cap: outputSplit(cmd.outputCapBytes) } : {}),
      })
      await t.send(shell, line, sink)
      const end = await ended.catch(async (err: unknown) => {
        shell.alive = false
        await aborting
        throw err
      })
      await aborting
      if (end.mark?.ended) {
        // The shell exited by itself; what is left of it (a provider session) goes.
        shell.alive = false
        void t.killShell(shell).catch(() => undefined)
      }
      if (!shell.alive && this.shell === shell) this.shell = undefined
      if (end.mark?.status === -1 && !end.mark.ended) {
        throw new AppError(
          'BAD_REQUEST',
          `cannot use working directory ${cmd.cwd} in sandbox ${t.sandboxId}; create it first or pass an existing cwd`,
        )
      }
      if (end.mark) {
        stdout.droppedInSandbox(end.mark.droppedStdout)
        stderr.droppedInSandbox(end.mark.droppedStderr)
      }
      const status = timedOut ? undefined : end.status
      return {
        exitCode: status ?? null,
        ...(status === undefined ? { signal: 'SIGKILL' } : {}),
        stdout: stdout.finish(),
        stderr: stderr.finish(),
        timedOut,
        truncated: stdout.truncated || stderr.truncated,
        durationMs: Math.round(performance.now() - at.started),
        sandboxId: t.sandboxId,
        shellRestarted: end.mark ? !end.mark.continuous : at.fresh && !at.firstShell,
      }
    } finally {
      clearTimeout(timer)
      opts.signal?.removeEventListener('abort', abort)
      over = true
    }
  }

  /** Kills what the shell runs; when the command does not reach its end, the shell goes too. */
  private async abort(shell: S, ended: Promise<unknown>, endNow: () => void): Promise<void> {
    const how = await this.transport.abortCommand(shell).catch(() => 'ok' as const)
    if (how === 'gone') {
      shell.alive = false
      endNow()
      return
    }
    let timer: NodeJS.Timeout | undefined
    const late = new Promise<'late'>((resolve) => (timer = setTimeout(() => resolve('late'), SHELL_KILL_MS)))
    const first = await Promise.race([
      ended.then(
        () => 'ended' as const,
        () => 'ended' as const,
      ),
      late,
    ])
    clearTimeout(timer)
    if (first === 'late' && shell.alive) {
      shell.alive = false
      await this.transport.killShell(shell).catch(() => undefined)
      endNow()
    }
  }

  /** Ends the shell (best effort); the next call would start a new one. */
  async close(): Promise<void> {
    const shell = this.shell
    this.shell = undefined
    if (shell?.alive) {
      shell.alive = false
      await this.transport.killShell(shell).catch(() => undefined)
    }
  }
}
