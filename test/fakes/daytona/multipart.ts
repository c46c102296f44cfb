/** One part of a multipart/form-data body. */
export interface Part {
  name: string
  filename?: string
  headers: Record<string, string>
  data: Buffer
}

/** The boundary of a `multipart/form-data; boundary=…` content type. */
export function boundaryOf(contentType: string | undefined): string | undefined {
  const m = /boundary=(?:"([^"]+)"|([^;]+))/i.exec(contentType ?? '')
  return m ? (m[1] ?? m[2])?.trim() : undefined
}

function param(disposition: string, key: string): string | undefined {
  const m = new RegExp(`(?:^|;)\\s*${key}="((?:[^"\\\\]|\\\\.)*)"`, 'i').exec(disposition)
  return m?.[1]?.replace(/\\(.)/g, '$1')
}

/** Parses a buffered multipart/form-data body (the upload side of the fake). */
export function parseMultipart(body: Buffer, boundary: string): Part[] {
  const delimiter = Buffer.from(`--${boundary}`)
  const parts: Part[] = []
  let at = body.indexOf(delimiter)
  while (at >= 0) {
    const start = at + delimiter.length
    if (body.subarray(start, start + 2).toString() === '--') break
    const headerEnd = body.indexOf('\r\n\r\n', start)
    if (headerEnd < 0) break
    const next = body.indexOf(Buffer.from(`\r\n--${boundary}`), headerEnd + 4)
    if (next < 0) break
    const headers: Record<string, string> = {}
    for (const line of body
      .subarray(start + 2, headerEnd)
      .toString('latin1')
      .split('\r\n')) {
      const colon = line.indexOf(':')
      if (colon > 0) headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim()
    }
    const disposition = headers['content-disposition'] ?? ''
    const filename = param(disposition, 'filename')
    parts.push({
      name: param(disposition, 'name') ?? '',
      ...(filename !== undefined ? { filename: Buffer.from(filename, 'latin1').toString('utf8') } : {}),
      headers,
      data: body.subarray(headerEnd + 4, next),
    })
    at = next + 2
  }
  return parts
}

/** The multipart boundary Daytona's daemon uses for downloads. */
export const DOWNLOAD_BOUNDARY = 'DAYTONA-FILE-BOUNDARY'

/** `filename="…"` the way the daemon writes it: Latin-1 with other characters replaced by `_`. */
function latin1Name(path: string): string {
  let out = ''
  for (const ch of path
    .replace(/\\/g, '\\\\')
    .replace(/"/g, '\\"')
    .replace(/[\r\n\0]/g, '')) {
    const code = ch.codePointAt(0) ?? 0
    out += code > 0xff || code < 0x20 || code === 0x7f ? '_' : ch
  }
  return out
}

/** RFC 5987 percent-encoding of the UTF-8 bytes (the daemon's `filename*`). */
function rfc5987(path: string): string {
  let out = ''
  for (const byte of Buffer.from(path, 'utf8')) {
    const ch = String.fromCharCode(byte)
    out += /[A-Za-z0-9!#$&+\-.^_`|~]/.test(ch) ? ch : `%${byte.toString(16).toUpperCase().padStart(2, '0')}`
  }
  return out
}

/** One part of a download response: `file` with the bytes, or `error` with a JSON ErrorResponse. */
export function downloadPart(kind: 'file' | 'error', path: string, data: Buffer): Buffer {
  const headers = [
    `Content-Disposition: form-data; name="${kind}"; filename="${latin1Name(path)}"; filename*=utf-8''${rfc5987(path)}`,
    kind === 'file'
      ? 'Content-Type: application/octet-stream'
      : 'Content-Type: application/json; charset=utf-8',
    ...(kind === 'file' ? [`Content-Length: ${data.length}`] : []),
  ]
  return Buffer.concat([
    Buffer.from(`--${DOWNLOAD_BOUNDARY}\r\n${headers.join('\r\n')}\r\n\r\n`, 'latin1'),
    data,
    Buffer.from('\r\n'),
  ])
}

/** The closing delimiter of a download response. */
export function downloadEnd(): Buffer {
  return Buffer.from(`--${DOWNLOAD_BOUNDARY}--\r\n`)
}
