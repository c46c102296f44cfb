import { StringDecoder } from 'node:string_decoder'
import {
  AppError,
  type ExecOptions,
  type ExecResult,
  joinHeadTail,
  type ResolvedExec,
} from '../../src/sandbox/index.js'
import type { AgentChannel } from './channel.js'
import { execError, signalName } from './errors.js'
import { Frame, decodeErr, decodeExit, decodeTail, encodeEmpty, encodeExec } from './protocol.js'

/** setTimeout's largest delay; longer ones fire at once. */
const MAX_TIMER_MS = 2 ** 31 - 1
/**
 * How long a cancelled call waits for the agent to confirm the kill before it answers anyway (ms):
 * the agent's last resort for a persistent shell, killing the shell, comes 2 s after the cancel.
 */
const CANCEL_CONFIRM_MS = 3_000

/** A checked exec request (`resolveExecRequest`), and whether it runs in the persistent shell. */
export interface AgentExec extends ResolvedExec {
  /** Run in the persistent shell; `cwdExplicit`: the call named its cwd (a cd that stays). */
  shell?: { cwdExplicit: boolean }
}

/** A command in flight. */
export interface ExecRun {
  /** The normalised result; rejects on abort (with the abort reason) or a lost sandbox. */
  result: Promise<ExecResult>
  /** Resolves once the agent no longer runs the command (its concurrency slot is free). */
  settled: Promise<void>
}

/**
 * Collects one stream: the agent sends its head (up to the cap) live and, when it was longer, its
 * tail and how many bytes it dropped between them (TAIL). The live callback gets the head as it
 * comes and the rest of the result (marker, tail) at the end, so what it got in all is the result.
 */
class StreamSink {
  private readonly chunks: Buffer[] = []
  private bytes = 0
  truncated = false
  /** Characters given to the live callback so far (a prefix of the result's text). */
  private liveChars = 0
  private tail: { droppedBytes: number; bytes: Buffer } | undefined
  private readonly decoder: StringDecoder | undefined

  constructor(
    private readonly cap: number,
    private readonly onChunk: ((chunk: string) => void) | undefined,
  ) {
    this.decoder = onChunk ? new StringDecoder('utf8') : undefined
  }

  push(chunk: Buffer): void {
    const room = this.cap - this.bytes
    if (chunk.length > room) this.truncated = true
    const kept = chunk.length > room ? chunk.subarray(0, Math.max(0, room)) : chunk
    if (kept.length === 0) return
    this.chunks.push(kept)
    this.bytes += kept.length
    const text = this.decoder?.write(kept)
    if (!text) return
    this.liveChars += text.length
    this.onChunk?.(text)
  }

  /** The agent's TAIL frame for this stream. */
  pushTail(droppedBytes: number, bytes: Buffer): void {
    if (droppedBytes > 0) this.truncated = true
    this.tail = { droppedBytes, bytes: Buffer.from(bytes) }
  }

  finish(): string {
    const head = Buffer.concat(this.chunks)
    const text = this.tail
      ? joinHeadTail(head, this.tail.droppedBytes, this.tail.bytes)
      : head.toString('utf8')
    // The decoder only ever emitted whole characters of the head, a prefix of the result's text.
    const rest = this.decoder ? text.slice(this.liveChars) : ''
    if (rest) this.onChunk?.(rest)
    return text
  }
}

/**
 * Runs one command through the agent channel. The agent enforces the timeout (killing the whole
 * process group, keeping partial output) and the output cap; `watchdogMs` past the timeout the
 * host gives up on an agent that never reported (paused or wedged container).
 */
export function startExec(
  channel: AgentChannel,
  request: AgentExec,
  opts: ExecOptions,
  watchdogMs: number,
): ExecRun {
  const id = channel.allocateId()
  const sandboxId = channel.sandboxId
  const started = performance.now()
  let settle!: () => void
  const settled = new Promise<void>((resolve) => (settle = resolve))
  const result = new Promise<ExecResult>((resolve, reject) => {
    let done = false
    /** The caller aborted: the call rejects with the abort reason once the agent confirms the kill. */
    let aborted = false
    const signal = opts.signal
    const finish = (outcome: () => void): void => {
      if (done) return
      done = true
      clearTimeout(watchdog)
      signal?.removeEventListener('abort', onAbort)
      outcome()
    }
    const release = (): void => {
      channel.unsubscribe(id)
      settle()
    }
    const cancel = (): void => channel.trySend(encodeEmpty(Frame.CANCEL, id))
    // A cancelled call answers once the agent reports that the command is gone (its EXIT, at most
    // CANCEL_CONFIRM_MS later), so whoever is told "cancelled" never finds the command still running.
    const onAbort = (): void => {
      if (done || aborted) return
      aborted = true
      cancel()
      const rejectNow = (): void => finish(() => reject(signal?.reason))
      const unconfirmed = setTimeout(rejectNow, CANCEL_CONFIRM_MS)
      void settled.then(() => {
        clearTimeout(unconfirmed)
        rejectNow()
      })
    }
    const guard = (push: () => void): void => {
      try {
        push()
      } catch (err) {
        cancel()
        finish(() => reject(err))
      }
    }
    const watchdog = setTimeout(
      () => {
        const error = new AppError(
          'SANDBOX_TIMEOUT',
          `sandbox ${sandboxId}: no result ${watchdogMs} ms after the ${request.timeoutMs} ms timeout; ` +
            `the container may be paused or overloaded; destroy it and create a new sandbox`,
          { retryable: true },
        )
        finish(() => reject(error))
        // A wedged agent: drop the connection (the next call reconnects) so no slot stays taken.
        channel.close(error)
      },
      Math.min(request.timeoutMs + watchdogMs, MAX_TIMER_MS),
    )
    const stdout = new StreamSink(request.outputCapBytes, opts.onStdout)
    const stderr = new StreamSink(request.outputCapBytes, opts.onStderr)

    if (signal?.aborted) {
      settle()
      finish(() => reject(signal.reason))
      return
    }
    signal?.addEventListener('abort', onAbort, { once: true })
    try {
      channel.subscribe(id, {
        onFrame(frame) {
          switch (frame.type) {
            case Frame.STDOUT:
              if (!done) guard(() => stdout.push(frame.payload))
              break
            case Frame.STDERR:
              if (!done) guard(() => stderr.push(frame.payload))
              break
            case Frame.TAIL:
              if (!done) {
                const t = decodeTail(frame.payload)
                ;(t.stream === 'stdout' ? stdout : stderr).pushTail(t.droppedBytes, t.tail)
              }
              break
            case Frame.EXIT: {
              release()
              const exit = decodeExit(frame.payload)
              if (done || aborted) return
              guard(() => {
                const out = stdout.finish()
                const err = stderr.finish()
                finish(() =>
                  resolve({
                    exitCode: exit.signalled ? null : exit.value,
                    ...(exit.signalled ? { signal: signalName(exit.value) } : {}),
                    stdout: out,
                    stderr: err,
                    timedOut: exit.timedOut,
                    truncated: exit.truncated || stdout.truncated || stderr.truncated,
                    durationMs: Math.round(performance.now() - started),
                    sandboxId,
                    ...(request.shell ? { shellRestarted: exit.shellRestarted === true } : {}),
                  }),
                )
              })
              break
            }
            case Frame.ERR:
              release()
              if (!aborted) finish(() => reject(execError(sandboxId, decodeErr(frame.payload))))
              break
            default:
              break
          }
        },
        onClose(error) {
          settle()
          if (!aborted) finish(() => reject(error))
        },
      })
      channel.send(
        encodeExec(id, {
          timeoutMs: request.timeoutMs,
          capBytes: request.outputCapBytes,
          cwd: request.cwd,
          command: request.command,
          env: request.env,
          stdin: request.stdin,
          ...(request.shell ? { shell: request.shell } : {}),
        }),
      )
    } catch (err) {
      release()
      finish(() => reject(err))
    }
  })
  return { result, settled }
}
