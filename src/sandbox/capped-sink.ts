import { StringDecoder } from 'node:string_decoder'

/**
 * Collects one output stream up to a byte cap and feeds the live callback. Past the cap, output
 * is dropped on the client (the SDK keeps reading, so the process is never blocked) and
 * `truncated` is set.
 */
export class CappedSink {
  private readonly chunks: Buffer[] = []
  private bytes = 0
  truncated = false
  private readonly decoder = new StringDecoder('utf8')

  constructor(
    private readonly cap: number,
    private readonly onChunk: ((chunk: string) => void) | undefined,
  ) {}

  push(text: string): void {
    if (!text) return
    const room = this.cap - this.bytes
    if (room <= 0) {
      this.truncated = true
      return
    }
    let kept = Buffer.from(text, 'utf8')
    if (kept.length > room) {
      this.truncated = true
      kept = kept.subarray(0, room)
    }
    this.chunks.push(kept)
    this.bytes += kept.length
    if (this.onChunk) {
      const live = this.decoder.write(kept)
      if (live) this.onChunk(live)
    }
  }

  /** The collected text; flushes the live decoder. */
  finish(): string {
    if (this.onChunk) {
      const rest = this.decoder.end()
      if (rest) this.onChunk(rest)
    }
    return Buffer.concat(this.chunks).toString('utf8')
  }
}
