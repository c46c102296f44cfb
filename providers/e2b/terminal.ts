/**
 * Terminals of the E2B provider on E2B's own PTYs (`sandbox.pty.*` of the SDK): output as a byte
 * stream (no faster than it is read), keyboard input and resizes in the order they were given, the
 * end as the shell's exit code or signal.
 */
import { constants } from 'node:os'
import { Duplex } from 'node:stream'
import { CommandExitError, type CommandHandle, type Sandbox as E2BSdkSandbox } from 'e2b'
import {
  AppError,
  resolveSandboxPath,
  type SandboxTerminal,
  type TerminalExit,
  type TerminalOptions,
} from '../../src/sandbox/index.js'

/** What a terminal needs of its sandbox handle. */
export interface E2BTerminalContext {
  sdk: E2BSdkSandbox
  sandboxId: string
  /** The profile's cwd: the default working directory, and what a relative `cwd` resolves against. */
  cwd: string
  requestTimeoutMs: number
  /** Maps an SDK error of `what` to an AppError. */
  classify(err: unknown, what: string): Promise<AppError>
  /**
   * Called on every use (open, input, output, resize) and every `keepAliveMs` while the terminal is
   * open: refreshes the sandbox's server-side lifetime, so an open terminal keeps its sandbox, as a
   * Docker terminal's lease does.
   */
  onUse(): void
  keepAliveMs: number
}

const quote = (s: string): string => `'${s.replaceAll("'", `'\\''`)}'`

/** Go's names of signals in envd's end status (`signal: killed`), by the names Node knows. */
const GO_SIGNALS: Readonly<Record<string, string>> = {
  killed: 'SIGKILL',
  terminated: 'SIGTERM',
  hangup: 'SIGHUP',
  interrupt: 'SIGINT',
  quit: 'SIGQUIT',
  aborted: 'SIGABRT',
  'broken pipe': 'SIGPIPE',
  'segmentation fault': 'SIGSEGV',
  'user defined signal 1': 'SIGUSR1',
  'user defined signal 2': 'SIGUSR2',
  'alarm clock': 'SIGALRM',
}

/** The signal named by an end status such as `signal: killed` (Go's names) or `signal: hup`. */
function signalOf(error: string | undefined): string | undefined {
  const name = /^signal: (.+)$/
    .exec(error ?? '')?.[1]
    ?.trim()
    .toLowerCase()
  if (!name) return undefined
  const short = `SIG${name.replace(/^sig/, '').toUpperCase()}`
  return GO_SIGNALS[name] ?? (short in constants.signals ? short : undefined)
}

/** How the PTY's process ended, from the SDK's wait, or why its stream broke (`lost`). Never rejects. */
function exitOf(handle: CommandHandle): Promise<{ exit: TerminalExit; lost?: unknown }> {
  return handle.wait().then(
    (r) => ({ exit: { exitCode: r.exitCode } }),
    (err: unknown) => {
      if (!(err instanceof CommandExitError)) return { exit: { exitCode: null }, lost: err }
      const signal = signalOf(err.error)
      return { exit: signal ? { exitCode: null, signal } : { exitCode: err.exitCode } }
    },
  )
}

function checkSize(name: 'cols' | 'rows', v: number): void {
  if (!Number.isInteger(v) || v < 1 || v > 65535)
    throw new AppError('BAD_REQUEST', `terminal ${name} ${v} is out of range; give an integer of 1-65535`)
}

/**
 * The environment of the PTY. The SDK's PTY always runs `/bin/bash -i -l`; a `command` is run by
 * that bash before its first prompt: started in POSIX mode (`POSIXLY_CORRECT`), it reads no startup
 * file, and its `PROMPT_COMMAND` restores the caller's environment and `exec`s `bash -c <command>`,
 * which keeps the shell's pid and leaves the terminal untouched (no prompt, no echo).
 */
function envOf(opts: TerminalOptions): Record<string, string> {
  const env: Record<string, string> = { TERM: 'xterm-256color', ...(opts.env ?? {}) }
  if (!opts.command) return env
  const restore = ['POSIXLY_CORRECT', 'PROMPT_COMMAND']
    .map((name) => {
      const value = env[name]
      return value === undefined ? `unset ${name}` : `export ${name}=${quote(value)}`
    })
    .join('; ')
  return {
    ...env,
    POSIXLY_CORRECT: 'y',
    PROMPT_COMMAND: `${restore}; set +o posix; exec /bin/bash -c ${quote(opts.command)}`,
  }
}

/**
 * Opens a terminal on an E2B PTY: bash (or `bash -c <command>`) of the size given, in `cwd` (the
 * profile's by default), with `env` (`TERM` defaults to `xterm-256color`). The PTY has no deadline:
 * it lives until its shell ends or {@link SandboxTerminal.close} kills it (SIGKILL, through E2B).
 */
export async function openE2BTerminal(
  ctx: E2BTerminalContext,
  opts: TerminalOptions,
): Promise<SandboxTerminal> {
  checkSize('cols', opts.cols)
  checkSize('rows', opts.rows)
  const cwd = opts.cwd ? resolveSandboxPath(ctx.cwd, opts.cwd) : ctx.cwd
  opts.signal?.throwIfAborted()
  ctx.onUse()
  const request = { requestTimeoutMs: ctx.requestTimeoutMs }

  // Output waits in the stream until read: the SDK reads no further event while onData waits.
  let wake: (() => void) | undefined
  let closing = false
  let handle: CommandHandle | undefined
  // Input and resizes go out one after another, in order (a resize lands before the input after it).
  let queue: Promise<unknown> = Promise.resolve()
  const inOrder = <T>(call: () => Promise<T>): Promise<T> => {
    const next = queue.then(call)
    queue = next.catch(() => undefined)
    return next
  }
  const close = (): void => {
    if (closing || !handle) return
    closing = true
    wake?.()
    const h = handle
    // Not killed (already gone, or E2B unreachable): stop reading, which ends the terminal here.
    h.kill().then(
      (killed) => (killed ? undefined : h.disconnect()),
      () => h.disconnect(),
    )
  }
  const stream = new Duplex({
    read() {
      const w = wake
      wake = undefined
      w?.()
    },
    write(chunk: Buffer, _encoding, callback) {
      ctx.onUse()
      const pid = handle?.pid ?? 0
      inOrder(() => ctx.sdk.pty.sendInput(pid, chunk, request)).then(
        () => callback(),
        async (err: unknown) => callback(await ctx.classify(err, 'typing into a terminal')),
      )
    },
    final(callback) {
      callback()
    },
    destroy(err, callback) {
      close()
      callback(err)
    },
  })

  const onData = (data: Uint8Array): Promise<void> | undefined => {
    if (stream.destroyed || closing) return undefined
    ctx.onUse()
    if (stream.push(Buffer.from(data.buffer, data.byteOffset, data.byteLength))) return undefined
    return new Promise<void>((resolve) => (wake = resolve))
  }
  try {
    handle = await ctx.sdk.pty.create({
      cols: opts.cols,
      rows: opts.rows,
      cwd,
      envs: envOf(opts),
      onData,
      // No deadline: the terminal lives until it ends or is closed.
      timeoutMs: 0,
      ...request,
    })
  } catch (err) {
    // envd's answer for a missing cwd varies; whether the cwd exists settles it.
    const missing =
      opts.cwd !== undefined &&
      !(await ctx.sdk.files.exists(cwd, request).then(
        (exists) => exists,
        () => true,
      ))
    if (missing)
      throw new AppError(
        'BAD_REQUEST',
        `terminal cwd ${cwd} does not exist in sandbox ${ctx.sandboxId}; create it or pick another`,
        { cause: err },
      )
    throw await ctx.classify(err, 'opening a terminal')
  }
  if (opts.signal?.aborted) {
    close()
    throw opts.signal.reason
  }

  const pid = handle.pid
  const keepAlive = setInterval(() => ctx.onUse(), ctx.keepAliveMs).unref()
  const exited = exitOf(handle).then(async ({ exit, lost }) => {
    clearInterval(keepAlive)
    // A stream that broke by itself (the sandbox gone) is an error of the stream, as Docker's is.
    if (lost !== undefined && !closing && !stream.destroyed)
      stream.destroy(await ctx.classify(lost, 'reading a terminal').catch((e: unknown) => e as Error))
    else if (!stream.destroyed) stream.push(null)
    return exit
  })
  return {
    stream,
    pid,
    exited,
    resize(cols, rows) {
      checkSize('cols', cols)
      checkSize('rows', rows)
      ctx.onUse()
      // A terminal that is gone ignores it, as a closed pty would.
      inOrder(() => ctx.sdk.pty.resize(pid, { cols, rows }, request)).catch(() => undefined)
    },
    close,
  }
}
