import type { Sandbox as RemoteSandbox } from '@daytonaio/sdk'
import { DaytonaTimeoutError } from '@daytonaio/sdk'
import { randomBytes } from 'node:crypto'
import { constants } from 'node:os'
import { StringDecoder } from 'node:string_decoder'
import {
  AppError,
  type ExecOptions,
  type ExecResult,
  joinHeadTail,
  outputSplit,
  type ResolvedExec,
} from '../../src/sandbox/index.js'
import type { ResolvedDaytonaProviderOptions } from './options.js'
import {
  type DaemonCall,
  RUN_ROOT,
  cancelCall,
  parsePoll,
  parseRunReport,
  pollCall,
  runCall,
} from './wrapper.js'

const signalNames = new Map<number, string>(Object.entries(constants.signals).map(([name, n]) => [n, name]))

/** What a command run needs from its sandbox handle. */
export interface ExecContext {
  remote: RemoteSandbox
  sandboxId: string
  options: ResolvedDaytonaProviderOptions
  /** Runs a small daemon call (poll, cancel) outside the concurrency slots. */
  call(call: DaemonCall, timeoutSec: number): Promise<{ exitCode: number; result: string }>
  /** Maps a toolbox failure, turning it into `SANDBOX_LOST` when the sandbox is gone or stopped. */
  fail(err: unknown, what: string): Promise<AppError>
}

/** A command in flight. */
export interface ExecRun {
  /** The normalised result; rejects with the abort reason on abort. */
  result: Promise<ExecResult>
  /** Resolves once the daemon no longer runs the wrapper (the concurrency slot is free again). */
  settled: Promise<void>
}

/** One stream's live delivery: bytes fetched by polls (the head), then the rest of the result at the end. */
class StreamTail {
  /** Bytes of the run's output file fetched so far (the next poll's offset). */
  fetched = 0
  private delivered = 0
  /** Characters given to the live callback so far (a prefix of the result's text). */
  private liveChars = 0
  private readonly decoder: StringDecoder | undefined

  constructor(
    private readonly cap: number,
    private readonly onChunk: ((chunk: string) => void) | undefined,
  ) {
    this.decoder = onChunk ? new StringDecoder('utf8') : undefined
  }

  polled(bytes: Buffer): void {
    this.fetched += bytes.length
    this.deliver(bytes)
  }

  private deliver(bytes: Buffer): void {
    const kept = bytes.subarray(0, Math.max(0, this.cap - this.delivered))
    if (kept.length === 0) return
    this.delivered += kept.length
    const text = this.decoder?.write(kept)
    if (!text) return
    this.liveChars += text.length
    this.onChunk?.(text)
  }

  /** Delivers what the polls did not, from the result's text (past the cap: head, marker, tail). */
  finish(text: string): void {
    if (!this.decoder) return
    // The decoder only ever emitted whole characters of the head, a prefix of the result's text.
    const rest = text.slice(this.liveChars)
    this.liveChars = text.length
    if (rest) this.onChunk?.(rest)
  }
}

/** A stream from the wrapper's report: past the cap the head of the cap and the tail, with the marker. */
function headAndTail(bytes: Buffer, total: number, cap: number): string {
  const dropped = total - cap
  if (dropped <= 0) return bytes.toString('utf8')
  const { head } = outputSplit(cap)
  return joinHeadTail(bytes.subarray(0, head), dropped, bytes.subarray(head))
}

function failure(sandboxId: string, step: string, cwd: string): AppError {
  switch (step) {
    case 'cwd':
      return new AppError(
        'BAD_REQUEST',
        `cannot use working directory ${cwd} in sandbox ${sandboxId}; create it first or pass an existing cwd`,
      )
    case 'setsid':
    case 'base64':
    case 'mkfifo':
      return new AppError(
        'CONFIG_INVALID',
        `sandbox ${sandboxId} has no '${step}' command, which the exec wrapper needs; use a snapshot or ` +
          `image with coreutils/util-linux or busybox (Debian, Ubuntu and Alpine bases have them)`,
      )
    default:
      return new AppError(
        'QUOTA_EXCEEDED',
        `sandbox ${sandboxId}: the exec wrapper could not prepare ${RUN_ROOT} (${step}); /tmp may be full or read-only`,
        { retryable: true },
      )
  }
}

/**
 * Runs one command under the in-sandbox wrapper (see `wrapper.ts`): one daemon call for the run,
 * one upload first when there is stdin, and output polls while it runs when live callbacks are set.
 */
export function startRun(ctx: ExecContext, run: ResolvedExec, opts: ExecOptions): ExecRun {
  const { remote, sandboxId, options } = ctx
  const started = performance.now()
  const runId = randomBytes(12).toString('hex')
  const mark = `@@SBX-${randomBytes(8).toString('hex')}@@`
  const signal = opts.signal
  let settle!: () => void
  const settled = new Promise<void>((resolve) => (settle = resolve))

  const result = new Promise<ExecResult>((resolve, reject) => {
    if (signal?.aborted) {
      settle()
      reject(signal.reason)
      return
    }
    let done = false
    let pollTimer: NodeJS.Timeout | undefined
    const live = Boolean(opts.onStdout || opts.onStderr)
    const stdout = new StreamTail(run.outputCapBytes, opts.onStdout)
    const stderr = new StreamTail(run.outputCapBytes, opts.onStderr)
    const cancel = (): void => {
      void ctx.call(cancelCall(runId), 30).catch(() => undefined)
    }
    const finish = (outcome: () => void): void => {
      if (done) return
      done = true
      clearTimeout(pollTimer)
      signal?.removeEventListener('abort', onAbort)
      outcome()
    }
    const onAbort = (): void => {
      cancel()
      finish(() => reject(signal?.reason))
    }
    /** A throwing live callback cancels the run and rejects with what it threw. */
    const guard = (deliver: () => void): boolean => {
      try {
        deliver()
        return true
      } catch (err) {
        cancel()
        finish(() => reject(err))
        return false
      }
    }
    signal?.addEventListener('abort', onAbort, { once: true })

    const poll = async (): Promise<void> => {
      if (done) return
      try {
        const call = pollCall(runId, mark, stdout.fetched, stderr.fetched, options.pollChunkBytes)
        const response = await ctx.call(call, 30)
        const chunk = done ? undefined : parsePoll(response.result, mark)
        const delivered =
          !chunk ||
          guard(() => {
            stdout.polled(chunk.stdout)
            stderr.polled(chunk.stderr)
          })
        if (!delivered) return
      } catch {
        // A failed poll is retried at the next tick; a lost sandbox fails the run itself.
      }
      if (!done) pollTimer = setTimeout(() => void poll(), options.pollIntervalMs)
    }

    const main = async (): Promise<{ exitCode: number; result: string }> => {
      let stdinPath: string | undefined
      if (run.stdin.length > 0) {
        stdinPath = `${RUN_ROOT}/${runId}/in`
        await remote.fs.uploadFile(
          Buffer.from(run.stdin),
          stdinPath,
          Math.ceil(options.requestTimeoutMs / 1000),
        )
      }
      // Started even after an abort during the upload: the cancel flag makes it exit at once and
      // the wrapper removes the run directory (with the stdin file).
      const call = runCall({ runId, mark, ...run, stdinPath })
      const daemonTimeoutSec = Math.ceil((run.timeoutMs + options.execGraceMs) / 1000)
      if (live) pollTimer = setTimeout(() => void poll(), options.pollIntervalMs)
      const response = await remote.process.executeCommand(
        call.command,
        undefined,
        call.env,
        daemonTimeoutSec,
      )
      return { exitCode: response.exitCode, result: response.result }
    }

    main().then(
      (response) => {
        settle()
        if (done) return
        const report = parseRunReport(response.result, mark)
        if (!report) {
          const snippet = response.result.slice(0, 300)
          finish(() =>
            reject(
              new AppError(
                'CONFIG_INVALID',
                `sandbox ${sandboxId} could not run the exec wrapper (exit ${response.exitCode}: ${snippet}); ` +
                  `use a snapshot or image with a POSIX sh`,
              ),
            ),
          )
          return
        }
        if (report.kind === 'fail') {
          finish(() => reject(failure(sandboxId, report.step, run.cwd)))
          return
        }
        const out = headAndTail(report.stdout, report.stdoutBytes, run.outputCapBytes)
        const err = headAndTail(report.stderr, report.stderrBytes, run.outputCapBytes)
        const flushed = guard(() => {
          stdout.finish(out)
          stderr.finish(err)
        })
        if (!flushed) return
        // 128+n with no matching EXIT-trap record: the shell itself died of signal n.
        const signalled =
          report.waitStatus > 128 && report.waitStatus <= 128 + 64 && report.trapStatus !== report.waitStatus
        finish(() =>
          resolve({
            exitCode: signalled ? null : report.waitStatus,
            ...(signalled
              ? { signal: signalNames.get(report.waitStatus - 128) ?? `SIG${report.waitStatus - 128}` }
              : {}),
            stdout: out,
            stderr: err,
            timedOut: report.timedOut,
            truncated: report.stdoutBytes > run.outputCapBytes || report.stderrBytes > run.outputCapBytes,
            durationMs: Math.round(performance.now() - started),
            sandboxId,
          }),
        )
      },
      async (err: unknown) => {
        settle()
        if (done) return
        let error = await ctx.fail(err, `running a command in sandbox ${sandboxId}`)
        if (err instanceof DaytonaTimeoutError && error.code !== 'SANDBOX_LOST') {
          error = new AppError(
            'SANDBOX_TIMEOUT',
            `sandbox ${sandboxId}: no result ${options.execGraceMs} ms after the ${run.timeoutMs} ms timeout; ` +
              `the sandbox may be stopped or overloaded; destroy it and create a new sandbox`,
            { retryable: true, cause: error },
          )
        }
        finish(() => reject(error))
      },
    )
  })
  return { result, settled }
}
