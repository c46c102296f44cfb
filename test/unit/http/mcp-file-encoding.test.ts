import fc from 'fast-check'
import { describe, expect, test } from 'vitest'
import { base64Bytes, utf8Text } from '../../../src/http/mcp-file-encoding.js'

describe('MCP file encoding', () => {
  test('any bytes round-trip through base64, padded, unpadded or line-wrapped', () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 300 }), (bytes) => {
        const b64 = Buffer.from(bytes).toString('base64')
        for (const form of [b64, b64.replace(/=+$/, ''), b64.replace(/(.{8})/g, '$1\n')])
          expect(Buffer.from(base64Bytes(form) as Uint8Array).equals(Buffer.from(bytes))).toBe(true)
      }),
    )
  })

  test('a stray character, a bad length or misplaced padding is an error, not a silent skip', () => {
    expect(base64Bytes('aGVs*bG8=')).toMatch(/character "\*" at 4/)
    expect(base64Bytes('aGVsbG8-')).toMatch(/character "-"/)
    for (const bad of ['a', 'aGVsb', 'a===', '=abc', 'ab=c', 'ab=', 'aGVsbG8=aGVs'])
      expect(base64Bytes(bad), bad).toMatch(/wrong length or padding/)
    expect((base64Bytes('') as Uint8Array).byteLength).toBe(0)
  })

  test('text is valid UTF-8 without NUL; anything else is binary', () => {
    fc.assert(
      fc.property(fc.string({ unit: 'grapheme', maxLength: 100 }), (s) => {
        fc.pre(!s.includes('\0'))
        expect(utf8Text(new TextEncoder().encode(s))).toBe(s)
      }),
    )
    expect(utf8Text(new Uint8Array([0x68, 0x00, 0x69]))).toBeUndefined()
    expect(utf8Text(new Uint8Array([0xff, 0xfe]))).toBeUndefined()
    expect(utf8Text(new Uint8Array([0xe2, 0x82]))).toBeUndefined() // a cut multi-byte sequence
  })
})
