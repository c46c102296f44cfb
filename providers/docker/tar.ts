/** One regular file of a {@link tarOf} archive. */
export interface TarEntry {
  /** Path inside the archive (relative, at most 100 bytes). */
  name: string
  data: Uint8Array
  /** Permission bits. @default 0o644 */
  mode?: number
}

const BLOCK = 512

function octal(value: number, width: number): string {
  return value.toString(8).padStart(width - 1, '0') + '\0'
}

/**
 * A ustar archive of regular files owned by root (what the Engine API's archive upload takes).
 * Only what the agent upload needs: short names, no directories, no links.
 */
export function tarOf(entries: readonly TarEntry[]): Buffer {
  const parts: Buffer[] = []
  for (const entry of entries) {
    const name = Buffer.from(entry.name, 'utf8')
    if (name.length === 0 || name.length > 100)
      throw new Error(`tar entry name must be 1-100 bytes: ${entry.name}`)
    const header = Buffer.alloc(BLOCK)
    name.copy(header, 0)
    header.write(octal(entry.mode ?? 0o644, 8), 100, 'ascii')
    header.write(octal(0, 8), 108, 'ascii') // uid
    header.write(octal(0, 8), 116, 'ascii') // gid
    header.write(octal(entry.data.length, 12), 124, 'ascii')
    header.write(octal(0, 12), 136, 'ascii') // mtime
    header.fill(' ', 148, 156) // checksum placeholder
    header.write('0', 156, 'ascii') // regular file
    header.write('ustar\u000000', 257, 'binary')
    let sum = 0
    for (const byte of header) sum += byte
    header.write(octal(sum, 7) + ' ', 148, 'ascii')
    parts.push(header, Buffer.from(entry.data))
    const pad = (BLOCK - (entry.data.length % BLOCK)) % BLOCK
    if (pad) parts.push(Buffer.alloc(pad))
  }
  parts.push(Buffer.alloc(BLOCK * 2))
  return Buffer.concat(parts)
}
