/**
 * Splits the Engine API's multiplexed attach stream (non-TTY exec): each block is
 * `u8 stream (1 stdout, 2 stderr) | 3 zero bytes | u32 size | size bytes`.
 */
export class DockerStreamDemuxer {
  private buffered: Buffer = Buffer.alloc(0)

  constructor(
    private readonly onStdout: (chunk: Buffer) => void,
    private readonly onStderr: (chunk: Buffer) => void,
  ) {}

  /** Feeds raw bytes from the hijacked connection. */
  push(chunk: Buffer): void {
    this.buffered = this.buffered.length === 0 ? chunk : Buffer.concat([this.buffered, chunk])
    let off = 0
    while (this.buffered.length - off >= 8) {
      const stream = this.buffered.readUInt8(off)
      const size = this.buffered.readUInt32BE(off + 4)
      if (this.buffered.length - off < 8 + size) break
      const body = this.buffered.subarray(off + 8, off + 8 + size)
      off += 8 + size
      if (stream === 2) this.onStderr(body)
      else this.onStdout(body)
    }
    this.buffered = off === this.buffered.length ? Buffer.alloc(0) : this.buffered.subarray(off)
  }
}
