/*
 * How the MCP file tools tell text from bytes and read base64 strictly: a file is text only when it
 * is valid UTF-8 without NUL bytes, and base64 content with a stray character is an error instead of
 * being decoded around it.
 */

const strictUtf8 = new TextDecoder('utf-8', { fatal: true })

/**
 * `data` as text when it is UTF-8 text: valid UTF-8 without NUL bytes (a NUL marks a binary file, as
 * git and grep take it). Undefined otherwise: decoding it would replace or hide bytes.
 */
export function utf8Text(data: Uint8Array): string | undefined {
  if (data.includes(0)) return undefined
  try {
    return strictUtf8.decode(data)
  } catch {
    return undefined
  }
}

/**
 * The bytes of base64 `content` (standard alphabet; padding optional; whitespace and line breaks are
 * ignored), or an error message when it is not base64: Node's decoder would silently skip bad characters.
 */
export function base64Bytes(content: string): Uint8Array | string {
  const compact = /\s/.test(content) ? content.replace(/\s+/g, '') : content
  const bad = /[^A-Za-z0-9+/=]/.exec(compact)
  const pad = compact.indexOf('=')
  const padded =
    pad < 0 || (compact.length % 4 === 0 && pad >= compact.length - 2 && /^=+$/.test(compact.slice(pad)))
  if (bad || !padded || compact.length % 4 === 1)
    return (
      'content is not valid base64' +
      (bad ? ` (character ${JSON.stringify(bad[0])} at ${bad.index})` : ' (wrong length or padding)') +
      '; send the standard base64 of the bytes (A-Z a-z 0-9 + /, = padding), or encoding null for UTF-8 text. Nothing was written'
    )
  return Buffer.from(compact, 'base64')
}
