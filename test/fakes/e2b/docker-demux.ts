/** Splits the multiplexed stream of an attached `docker exec` (no TTY) into stdout and stderr. */

/** Stream id in docker's frame header: 1 stdout, 2 stderr. */
export type DockerStream = 1 | 2

/**
 * Returns a function to feed raw chunks to; it calls `onFrame` for every complete frame, in order.
 * Each frame has an 8-byte header (stream id, three zero bytes, big-endian u32 length).
 */
export function createDemuxer(
  onFrame: (stream: DockerStream, payload: Buffer) => void,
): (chunk: Buffer) => void {
  let pending = Buffer.alloc(0)
  return (chunk) => {
    let buf = pending.length ? Buffer.concat([pending, chunk]) : chunk
    while (buf.length >= 8) {
      const size = buf.readUInt32BE(4)
      if (buf.length < 8 + size) break
      const payload = buf.subarray(8, 8 + size)
      const stream = buf[0] === 2 ? 2 : 1
      buf = buf.subarray(8 + size)
      if (payload.length) onFrame(stream, payload)
    }
    pending = Buffer.from(buf)
  }
}
