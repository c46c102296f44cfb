import { Duplex } from 'node:stream'
import { constants } from 'node:os'
import { AppError, type SandboxTerminal, type TerminalExit } from '../../src/sandbox/index.js'
import type { AgentChannel } from './channel.js'
import {
  type AgentFrame,
  type ErrFrame,
  Frame,
  STREAM_WINDOW_BYTES,
  type StreamClosedFrame,
  decodeErr,
  decodeStreamClosed,
  encodeStreamCtl,
  encodeStreamData,
} from './protocol.js'

/** Largest STREAM_DATA payload the host sends. */
const CHUNK_BYTES = 64 * 1024

/**
 * One stream of the agent channel (agent/ports.c) as a Node `Duplex`: a connection to a port inside
 * the sandbox, or a terminal. Flow control both ways: a write completes while fewer than
 * {@link STREAM_WINDOW_BYTES} sent bytes await the agent's ACK, and output is acknowledged only as
 * the reader takes it, so neither side buffers more than a window. Destroying it closes the stream
 * in the sandbox (a terminal: kills its processes).
 */
export class AgentStream extends Duplex {
  private unackedOut = 0
  private ackOwed = 0
  private waitingWrite: (() => void) | undefined
  private ended = false
  /** Destroyed here; the agent's STREAM_CLOSED is still to come. */
  private closing = false
  /** Set once the agent reported the stream gone. */
  closedWith: StreamClosedFrame | undefined
  private readonly closeListeners: ((c: StreamClosedFrame) => void)[] = []

  constructor(
    private readonly channel: AgentChannel,
    readonly streamId: number,
  ) {
    super({ allowHalfOpen: true })
  }

  /** Frames of this stream after it opened. */
  onFrame(frame: AgentFrame): void {
    switch (frame.type) {
      case Frame.STREAM_OUT:
        if (this.push(frame.payload)) this.ack(frame.payload.length)
        else this.ackOwed += frame.payload.length
        return
      case Frame.STREAM_ACK:
        this.unackedOut = Math.max(0, this.unackedOut - frame.payload.readUInt32BE(0))
        if (this.unackedOut < STREAM_WINDOW_BYTES) this.resumeWrite()
        return
      case Frame.STREAM_EOF:
        this.push(null)
        return
      case Frame.STREAM_CLOSED:
        this.agentClosed(decodeStreamClosed(frame.payload))
        return
      default:
        return
    }
  }

  /** The channel ended under the stream. */
  onChannelClosed(error: AppError): void {
    this.agentClosed({ kind: 'closed', code: 0 })
    this.destroy(error)
  }

  /** Calls `listener` once the agent reported the stream gone (or the channel ended). */
  onAgentClose(listener: (c: StreamClosedFrame) => void): void {
    if (this.closedWith) listener(this.closedWith)
    else this.closeListeners.push(listener)
  }

  /** Sends a control op (resize) unless the stream has ended. */
  control(ctl: Parameters<typeof encodeStreamCtl>[1]): void {
    if (!this.ended && !this.closing) this.channel.trySend(encodeStreamCtl(this.streamId, ctl))
  }

  private agentClosed(c: StreamClosedFrame): void {
    if (this.ended) return
    this.ended = true
    this.closedWith = c
    this.channel.unsubscribe(this.streamId)
    this.push(null)
    this.resumeWrite()
    for (const l of this.closeListeners.splice(0)) l(c)
  }

  private ack(bytes: number): void {
    if (bytes > 0 && !this.ended && !this.closing)
      this.channel.trySend(encodeStreamCtl(this.streamId, { op: 'ack', bytes }))
  }

  private resumeWrite(): void {
    const w = this.waitingWrite
    this.waitingWrite = undefined
    w?.()
  }

  override _read(): void {
    const owed = this.ackOwed
    this.ackOwed = 0
    this.ack(owed)
  }

  override _write(chunk: Buffer, _enc: BufferEncoding, cb: (err?: Error | null) => void): void {
    if (this.ended || this.closing) return cb()
    try {
      for (let off = 0; off < chunk.length; off += CHUNK_BYTES) {
        const part = chunk.subarray(off, off + CHUNK_BYTES)
        this.channel.send(encodeStreamData(this.streamId, part))
        this.unackedOut += part.length
      }
    } catch (err) {
      return cb(err as Error)
    }
    if (this.unackedOut < STREAM_WINDOW_BYTES) cb()
    else this.waitingWrite = () => cb()
  }

  override _final(cb: (err?: Error | null) => void): void {
    this.control({ op: 'eof' })
    cb()
  }

  override _destroy(err: Error | null, cb: (err?: Error | null) => void): void {
    // The end is reported once the agent closed the stream (a terminal: killed its processes), or
    // the channel ended; until then the subscription stays for the agent's STREAM_CLOSED.
    if (!this.ended && !this.closing) {
      this.closing = true
      if (this.channel.closed) this.agentClosed({ kind: 'closed', code: 0 })
      else this.channel.trySend(encodeStreamCtl(this.streamId, { op: 'close' }))
    }
    this.resumeWrite()
    cb(err)
  }
}

/**
 * Sends `openFrame` (PORT_OPEN or PTY_OPEN, encoded with `id`) and resolves with the stream once
 * the agent answers STREAM_OPENED (its pid), or rejects with the ERR mapped by `onError`.
 */
export function openAgentStream(
  channel: AgentChannel,
  id: number,
  openFrame: Buffer,
  onError: (err: ErrFrame) => AppError,
  signal?: AbortSignal,
): Promise<{ stream: AgentStream; pid: number }> {
  return new Promise((resolve, reject) => {
    const stream = new AgentStream(channel, id)
    let opened = false
    const onAbort = (): void => {
      if (opened) return
      channel.trySend(encodeStreamCtl(id, { op: 'close' }))
      channel.unsubscribe(id)
      reject(signal?.reason instanceof Error ? signal.reason : new AppError('BAD_REQUEST', 'aborted'))
    }
    if (signal?.aborted) return onAbort()
    signal?.addEventListener('abort', onAbort, { once: true })
    try {
      channel.subscribe(id, {
        onFrame: (frame) => {
          if (opened) return stream.onFrame(frame)
          signal?.removeEventListener('abort', onAbort)
          if (frame.type === Frame.STREAM_OPENED) {
            opened = true
            resolve({ stream, pid: frame.payload.readUInt32BE(0) })
          } else {
            channel.unsubscribe(id)
            reject(
              frame.type === Frame.ERR
                ? onError(decodeErr(frame.payload))
                : new AppError('INTERNAL', `sbx-agent answered a stream open with frame type ${frame.type}`),
            )
          }
        },
        onClose: (error) => {
          signal?.removeEventListener('abort', onAbort)
          if (opened) stream.onChannelClosed(error)
          else reject(error)
        },
      })
      channel.send(openFrame)
    } catch (err) {
      signal?.removeEventListener('abort', onAbort)
      channel.unsubscribe(id)
      reject(err)
    }
  })
}

const SIGNAL_NAMES = Object.fromEntries(
  Object.entries(constants.signals).map(([name, num]) => [num, name]),
) as Record<number, string>

/** A terminal over an {@link AgentStream}. */
export function agentTerminal(stream: AgentStream, pid: number): SandboxTerminal {
  const exited = new Promise<TerminalExit>((resolve) =>
    stream.onAgentClose((c) =>
      resolve(
        c.kind === 'exited'
          ? { exitCode: c.code }
          : c.kind === 'signalled'
            ? { exitCode: null, signal: SIGNAL_NAMES[c.code] ?? `SIG${c.code}` }
            : { exitCode: null },
      ),
    ),
  )
  return {
    stream,
    pid,
    exited,
    resize: (cols, rows) => stream.control({ op: 'resize', cols, rows }),
    close: () => stream.destroy(),
  }
}
