import fc from 'fast-check'
import { describe, expect, test } from 'vitest'
import { TokenFilter } from '../../../../providers/e2b/wrapper.js'

const nonce = '0123456789abcdef'
const RS = '\x1e'

/** Feeds `stream` in the given chunk sizes; returns the passed-through text and the report. */
function filter(stream: string, cuts: number[]) {
  const f = new TokenFilter(nonce)
  let out = ''
  let at = 0
  for (const cut of cuts) {
    const end = Math.min(stream.length, at + cut)
    out += f.push(stream.slice(at, end))
    at = end
  }
  out += f.push(stream.slice(at))
  out += f.end()
  return { out, report: f.report }
}

describe('e2b wrapper token filter', () => {
  test('tokens are stripped and reported wherever the chunks are cut', () => {
    const text = fc.string({ unit: fc.constantFrom('a', 'é', '😀', '\n', RS, '0', 'x', 't') })
    fc.assert(
      fc.property(
        text,
        text,
        fc.integer({ min: 0, max: 255 }),
        fc.boolean(),
        fc.nat(),
        fc.array(fc.integer({ min: 0, max: 12 }), { maxLength: 40 }),
        (before, after, code, timedOut, dropped, cuts) => {
          const tokens =
            `${RS}${nonce}x${code}\n${timedOut ? `${RS}${nonce}t\n` : ''}` +
            `${RS}${nonce}o${dropped}\n${RS}${nonce}e${dropped + 1}\n${RS}${nonce}s${code}\n`
          const { out, report } = filter(before + tokens + after, cuts)
          expect(out).toBe(before + after)
          expect(report).toEqual({
            exit: code,
            status: code,
            timedOut,
            cwdFailed: false,
            droppedStdout: dropped,
            droppedStderr: dropped + 1,
          })
        },
      ),
      { numRuns: 500 },
    )
  })

  test('look-alikes pass through untouched: another nonce, a bad kind, a token cut off at the end', () => {
    const other = `${RS}fedcba9876543210x0\n`
    const badKind = `${RS}${nonce}q1\n`
    const unfinished = `${RS}${nonce}x12`
    const { out, report } = filter(`a${other}b${badKind}c${unfinished}`, [3, 5, 7, 11])
    expect(out).toBe(`a${other}b${badKind}c${unfinished}`)
    expect(report).toEqual({ timedOut: false, cwdFailed: false, droppedStdout: 0, droppedStderr: 0 })
  })

  test('text that is not a token prefix is never held back (live output stays live)', () => {
    const f = new TokenFilter(nonce)
    expect(f.push('first\n')).toBe('first\n')
    expect(f.push(`x${RS}01`)).toBe('x')
    expect(f.push('z')).toBe(`${RS}01z`)
  })
})
