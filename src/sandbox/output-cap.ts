import { StringDecoder } from 'node:string_decoder'

/*
 * What a stream past `outputCapBytes` becomes, on every provider: its first `head` bytes, one marker
 * line saying how many bytes were dropped, then its last `tail` bytes (the error is usually at the
 * end). The tail is half the cap, at most OUTPUT_TAIL_MAX_BYTES; the head is the rest of the cap, so
 * a result holds at most the cap plus the marker per stream. The Docker agent (sbx-agent.c) computes
 * the same split; keep the two in step.
 */

/** The largest tail kept past the cap (bytes). */
export const OUTPUT_TAIL_MAX_BYTES = 256 * 1024

/** How a stream capped at `capBytes` is split: `head + tail === capBytes`. */
export function outputSplit(capBytes: number): { head: number; tail: number } {
  const tail = Math.min(Math.floor(capBytes / 2), OUTPUT_TAIL_MAX_BYTES)
  return { head: capBytes - tail, tail }
}

/** The line between the head and the tail of a truncated stream. */
export function droppedMarker(droppedBytes: number): string {
  return `\n[... ${droppedBytes} bytes dropped ...]\n`
}

/** Head, marker and tail as one string (no marker when nothing was dropped). */
export function joinHeadTail(head: Buffer, droppedBytes: number, tail: Buffer): string {
  if (droppedBytes <= 0) return Buffer.concat([head, tail]).toString('utf8')
  return head.toString('utf8') + droppedMarker(droppedBytes) + tail.toString('utf8')
}

/**
 * Collects one output stream client-side: the first `head` bytes, a ring of the last `tail` bytes,
 * and the count of everything between. Live chunks go to `onChunk` up to the head, and the rest of
 * the result (marker and tail) at the end, so the live stream adds up to the result. A sandbox that already cut the middle out reports how
 * much with {@link HeadTailSink.droppedInSandbox}.
 */
export class HeadTailSink {
  private readonly head: Buffer[] = []
  private headBytes = 0
  private ring: Buffer
  private ringStart = 0
  private ringBytes = 0
  private total = 0
  private sandboxDropped = 0
  /** Characters given to the live callback so far (a prefix of the result's text). */
  private liveChars = 0
  private readonly split: { head: number; tail: number }
  private readonly decoder: StringDecoder | undefined

  constructor(
    capBytes: number,
    private readonly onChunk?: (chunk: string) => void,
  ) {
    this.split = outputSplit(capBytes)
    this.ring = Buffer.alloc(0)
    this.decoder = onChunk ? new StringDecoder('utf8') : undefined
  }

  /** True once bytes were dropped (here or in the sandbox). */
  get truncated(): boolean {
    return this.dropped > 0
  }

  private get dropped(): number {
    return this.total - this.headBytes - this.ringBytes + this.sandboxDropped
  }

  /** Adds a chunk of the stream (a string is taken as UTF-8). */
  push(chunk: Buffer | string): void {
    let bytes = typeof chunk === 'string' ? Buffer.from(chunk, 'utf8') : chunk
    if (bytes.length === 0) return
    this.total += bytes.length
    const room = this.split.head - this.headBytes
    if (room > 0) {
      const kept = bytes.length > room ? bytes.subarray(0, room) : bytes
      this.head.push(kept)
      this.headBytes += kept.length
      const text = this.decoder?.write(kept)
      if (text) {
        this.liveChars += text.length
        this.onChunk?.(text)
      }
      bytes = bytes.subarray(kept.length)
    }
    if (bytes.length > 0) this.toRing(bytes)
  }

  /** The sandbox dropped this many bytes between the head and the tail it sent. */
  droppedInSandbox(bytes: number): void {
    this.sandboxDropped += Math.max(0, bytes)
  }

  /** The collected text (head, marker, tail); the live callback gets the rest of it. */
  finish(): string {
    const text = joinHeadTail(Buffer.concat(this.head), this.dropped, this.tailBytes())
    // The decoder only ever emitted whole characters of the head, a prefix of the result's text.
    const rest = this.decoder ? text.slice(this.liveChars) : ''
    if (rest) this.onChunk?.(rest)
    return text
  }

  private toRing(bytes: Buffer): void {
    const size = this.split.tail
    if (size === 0) return
    if (this.ring.length === 0) this.ring = Buffer.alloc(size)
    const src = bytes.length > size ? bytes.subarray(bytes.length - size) : bytes
    let end = (this.ringStart + this.ringBytes) % size
    for (let off = 0; off < src.length;) {
      const n = Math.min(src.length - off, size - end)
      src.copy(this.ring, end, off, off + n)
      off += n
      end = (end + n) % size
    }
    const filled = this.ringBytes + src.length
    this.ringBytes = Math.min(size, filled)
    if (filled > size) this.ringStart = end
  }

  private tailBytes(): Buffer {
    const size = this.ring.length
    if (this.ringBytes < size || this.ringStart === 0) return this.ring.subarray(0, this.ringBytes)
    return Buffer.concat([this.ring.subarray(this.ringStart), this.ring.subarray(0, this.ringStart)])
  }
}
