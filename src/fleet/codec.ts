/**
 * The gateway's wire format: one frame per request or answer, `[4-byte big-endian JSON length][JSON]
 * [bytes…]`. Byte arrays in the value travel raw after the JSON, each replaced there by
 * `{"$bytes":[offset,length]}`, so a 10 MB file costs 10 MB on the wire, not base64's 13.
 */

const BYTES = '$bytes'

/** Encodes `value` (JSON-able, with Uint8Arrays anywhere in it) as one frame. */
export function encodeFrame(value: unknown): Buffer {
  const blobs: Uint8Array[] = []
  let offset = 0
  const json = JSON.stringify(value, function (this: unknown, key: string, v: unknown) {
    // Buffer#toJSON runs before the replacer sees it: look at the holder's own value.
    const raw = (this as Record<string, unknown>)[key]
    if (raw instanceof Uint8Array) {
      blobs.push(raw)
      const ref = { [BYTES]: [offset, raw.byteLength] }
      offset += raw.byteLength
      return ref
    }
    return v
  })
  const head = Buffer.from(json ?? 'null', 'utf8')
  const len = Buffer.alloc(4)
  len.writeUInt32BE(head.byteLength)
  return Buffer.concat([len, head, ...blobs])
}

/** Decodes a frame of {@link encodeFrame}; throws on a malformed one. */
export function decodeFrame(frame: Uint8Array): unknown {
  const buf = Buffer.from(frame.buffer, frame.byteOffset, frame.byteLength)
  if (buf.byteLength < 4) throw new Error('gateway frame shorter than its header')
  const len = buf.readUInt32BE(0)
  if (4 + len > buf.byteLength) throw new Error('gateway frame shorter than its JSON length says')
  const body = buf.subarray(4 + len)
  return JSON.parse(buf.subarray(4, 4 + len).toString('utf8'), (_k, v: unknown) => {
    if (v && typeof v === 'object' && !Array.isArray(v)) {
      const ref = (v as Record<string, unknown>)[BYTES]
      if (Array.isArray(ref) && ref.length === 2 && Object.keys(v).length === 1) {
        const [at, n] = ref as [number, number]
        if (!Number.isInteger(at) || !Number.isInteger(n) || at < 0 || n < 0 || at + n > body.byteLength)
          throw new Error('gateway frame refers to bytes it does not hold')
        // A copy: the frame's buffer is not kept alive by one small slice.
        return new Uint8Array(body.subarray(at, at + n))
      }
    }
    return v
  })
}
