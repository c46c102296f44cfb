/**
 * The server name (SNI) of a TLS ClientHello at the start of `buf`: the name, `null` when the
 * hello carries none, `undefined` when `buf` is not (or not yet a whole) TLS handshake record.
 */
export function readSni(buf: Buffer): string | null | undefined {
  // record: type 22, version (2), length (2); handshake: type 1 (ClientHello), length (3)
  if (buf.length < 9 || buf[0] !== 0x16 || buf[5] !== 0x01) return undefined
  const recordEnd = 5 + buf.readUInt16BE(3)
  if (buf.length < recordEnd) return undefined
  let p = 9 + 2 + 32 // version, random
  const skip = (lenBytes: 1 | 2): boolean => {
    if (p + lenBytes > recordEnd) return false
    p += lenBytes + (lenBytes === 1 ? buf.readUInt8(p) : buf.readUInt16BE(p))
    return p <= recordEnd
  }
  if (!skip(1) || !skip(2) || !skip(1)) return undefined // session id, cipher suites, compression
  if (p + 2 > recordEnd) return null // no extensions
  const extEnd = Math.min(recordEnd, p + 2 + buf.readUInt16BE(p))
  p += 2
  while (p + 4 <= extEnd) {
    const type = buf.readUInt16BE(p)
    const len = buf.readUInt16BE(p + 2)
    p += 4
    if (type === 0 && p + 5 <= extEnd) {
      // server_name list: u16 list length, u8 name type (0 host_name), u16 name length, name
      const nameLen = buf.readUInt16BE(p + 3)
      return buf.toString('ascii', p + 5, Math.min(p + 5 + nameLen, extEnd)).toLowerCase()
    }
    p += len
  }
  return null
}
