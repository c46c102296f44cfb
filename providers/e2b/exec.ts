import { randomBytes } from 'node:crypto'
import { constants } from 'node:os'
import { CommandExitError, type CommandHandle, type Sandbox as E2BSdkSandbox, TimeoutError } from 'e2b'
import {
  AppError,
  type ExecOptions,
  type ExecResult,
  HeadTailSink,
  type ResolvedExec,
} from '../../src/sandbox/index.js'
import { type WrapperReport, TokenFilter, buildWrapper } from './wrapper.js'

/** What a command needs from its sandbox handle. */
export interface ExecContext {
  sdk: E2BSdkSandbox
  sandboxId: string
  requestTimeoutMs: number
  deadlineBufferMs: number
  stdinChunkBytes: number
  helperTimeoutMs: number
  /** How long to wait for the stream's end after the wrapper's last word (ms). */
  exitLingerMs: number
  /** Maps a failure to an AppError, probing the sandbox when the SDK error cannot tell a lost one. */
  classify(err: unknown, what: string): Promise<AppError>
}

/** A command in flight. */
export interface ExecRun {
  /** The normalised result; rejects with the abort reason on cancel, or an AppError. */
  result: Promise<ExecResult>
  /** Resolves once the command no longer runs in the sandbox (its concurrency slot is free). */
  settled: Promise<void>
}

const signalNames = new Map<number, string>(Object.entries(constants.signals).map(([name, n]) => [n, name]))

/** Exit code and signal from the wrapper's status and report (see wrapper.ts). */
function outcome(status: number, report: WrapperReport): Pick<ExecResult, 'exitCode' | 'signal'> {
  if (report.timedOut) return { exitCode: null, signal: 'SIGKILL' }
  if (report.exit === status) return { exitCode: status }
  if (status > 128 && signalNames.has(status - 128))
    return { exitCode: null, signal: signalNames.get(status - 128) }
  // envd reports -1 when the wrapper itself was killed by a signal.
  if (status < 0) return { exitCode: null }
  return { exitCode: status }
}

/** Sends SIGTERM to the wrapper, whose trap kills the command's process group (best effort). */
async function cancelInSandbox(ctx: ExecContext, pid: number): Promise<void> {
  await ctx.sdk.commands
    .run(`kill -s TERM ${pid} 2>/dev/null; true`, {
      timeoutMs: ctx.helperTimeoutMs,
      requestTimeoutMs: ctx.requestTimeoutMs,
    })
    .catch(() => undefined)
}

async function feedStdin(ctx: ExecContext, pid: number, data: Uint8Array): Promise<void> {
  const opts = { requestTimeoutMs: ctx.requestTimeoutMs }
  try {
    for (let off = 0; off < data.length; off += ctx.stdinChunkBytes) {
      await ctx.sdk.commands.sendStdin(pid, data.subarray(off, off + ctx.stdinChunkBytes), opts)
    }
    await ctx.sdk.commands.closeStdin(pid, opts)
  } catch {
    // The command exited without reading all of its stdin: nothing left to feed.
  }
}

/**
 * Runs one command through the wrapper. The wrapper enforces the timeout inside the sandbox
 * (partial output is kept); the SDK's stream deadline is the timeout plus a buffer, past which the
 * sandbox is presumed wedged. Past the cap the sandbox sends each stream's head and tail and how
 * many bytes it dropped between them; the result joins them with the marker (output-cap.ts).
 */
export function startExec(ctx: ExecContext, req: ResolvedExec, opts: ExecOptions): ExecRun {
  const started = performance.now()
  const nonce = randomBytes(8).toString('hex')
  const filter = new TokenFilter(nonce)
  const stdout = new HeadTailSink(req.outputCapBytes, opts.onStdout)
  const stderr = new HeadTailSink(req.outputCapBytes, opts.onStderr)
  const signal = opts.signal
  let cancelled = false
  let sawStatus!: () => void
  const statusSeen = new Promise<void>((resolve) => (sawStatus = resolve))

  const startP: Promise<CommandHandle> = ctx.sdk.commands
    .run(
      buildWrapper({
        nonce,
        command: req.command,
        cwd: req.cwd,
        timeoutMs: req.timeoutMs,
        outputCapBytes: req.outputCapBytes,
      }),
      {
        background: true,
        envs: req.env,
        stdin: req.stdin.length > 0,
        timeoutMs: req.timeoutMs + ctx.deadlineBufferMs,
        requestTimeoutMs: ctx.requestTimeoutMs,
        onStdout: (text) => {
          if (cancelled) return
          stdout.push(filter.push(text))
          if (filter.report.status !== undefined) sawStatus()
        },
        onStderr: (text) => {
          if (!cancelled) stderr.push(text)
        },
      },
    )
    .catch(async (err: unknown) => {
      throw await ctx.classify(err, `starting a command in sandbox ${ctx.sandboxId}`)
    })

  const runP = (async (): Promise<ExecResult> => {
    const handle = await startP
    const fed = req.stdin.length > 0 ? feedStdin(ctx, handle.pid, req.stdin) : Promise.resolve()
    const ended = handle.wait().then(
      (r) => r.exitCode,
      (err: unknown) => {
        if (err instanceof CommandExitError) return err.exitCode
        throw err
      },
    )
    ended.catch(() => undefined)
    let linger: NodeJS.Timeout | undefined
    // Past the wrapper's last word, a process that escaped with setsid may hold the pipes open.
    const lingered = statusSeen.then(
      () => new Promise<void>((resolve) => (linger = setTimeout(resolve, ctx.exitLingerMs))),
    )
    let status: number
    try {
      const first = await Promise.race([ended, lingered.then(() => undefined)])
      if (first === undefined) await handle.disconnect()
      status = filter.report.status ?? first ?? -1
    } catch (err) {
      await cancelInSandbox(ctx, handle.pid)
      const mapped = await ctx.classify(err, `running a command in sandbox ${ctx.sandboxId}`)
      if (err instanceof TimeoutError && mapped.code === 'SANDBOX_TIMEOUT') {
        throw new AppError(
          'SANDBOX_TIMEOUT',
          `sandbox ${ctx.sandboxId}: no result ${ctx.deadlineBufferMs} ms after the ${req.timeoutMs} ms timeout; ` +
            `the sandbox may be overloaded; destroy it and create a new sandbox`,
          { retryable: true, cause: mapped.cause },
        )
      }
      throw mapped
    } finally {
      clearTimeout(linger)
    }
    await fed
    stdout.push(filter.end())
    stdout.droppedInSandbox(filter.report.droppedStdout)
    stderr.droppedInSandbox(filter.report.droppedStderr)
    if (filter.report.cwdFailed) {
      throw new AppError(
        'BAD_REQUEST',
        `cannot use working directory ${req.cwd} in sandbox ${ctx.sandboxId}; create it first or pass an existing cwd`,
      )
    }
    return {
      ...outcome(status, filter.report),
      stdout: stdout.finish(),
      stderr: stderr.finish(),
      timedOut: filter.report.timedOut,
      truncated: stdout.truncated || stderr.truncated,
      durationMs: Math.round(performance.now() - started),
      sandboxId: ctx.sandboxId,
    }
  })()

  const settled = runP.then(
    () => undefined,
    () => undefined,
  )
  const result = new Promise<ExecResult>((resolve, reject) => {
    if (!signal) return runP.then(resolve, reject)
    const onAbort = (): void => {
      cancelled = true
      reject(signal.reason)
      // Kill the command group inside the sandbox once its pid is known; `settled` follows the wrapper's end.
      startP.then((handle) => cancelInSandbox(ctx, handle.pid)).catch(() => undefined)
    }
    if (signal.aborted) return onAbort()
    signal.addEventListener('abort', onAbort, { once: true })
    runP.finally(() => signal.removeEventListener('abort', onAbort)).then(resolve, reject)
  })
  return { result, settled }
}
