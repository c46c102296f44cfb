import fc from 'fast-check'
import { describe, expect, test } from 'vitest'
import { HeadTailSink, droppedMarker, outputSplit } from '../../../src/sandbox/output-cap.js'

describe('output past the cap: head, marker, tail', () => {
  test('the split: the tail is half the cap, at most 256 KiB; head + tail is the cap', () => {
    expect(outputSplit(1000)).toEqual({ head: 500, tail: 500 })
    expect(outputSplit(1024 * 1024)).toEqual({ head: 768 * 1024, tail: 256 * 1024 })
    expect(outputSplit(1)).toEqual({ head: 1, tail: 0 })
    expect(outputSplit(0)).toEqual({ head: 0, tail: 0 })
  })

  test('HeadTailSink keeps the head and the tail wherever the chunks are cut; live adds up to the result', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: 64 }),
        fc.string({ maxLength: 300, unit: fc.constantFrom('a', 'é', '😀', '\n', '語') }),
        fc.array(fc.integer({ min: 1, max: 40 }), { maxLength: 30 }),
        (cap, text, cuts) => {
          const bytes = Buffer.from(text, 'utf8')
          let live = ''
          const sink = new HeadTailSink(cap, (c) => (live += c))
          let at = 0
          for (const cut of cuts) {
            sink.push(bytes.subarray(at, Math.min(bytes.length, at + cut)))
            at = Math.min(bytes.length, at + cut)
          }
          sink.push(bytes.subarray(at))
          const out = sink.finish()
          const { head, tail } = outputSplit(cap)
          if (bytes.length <= cap) {
            expect(sink.truncated).toBe(false)
            expect(out).toBe(text)
          } else {
            expect(sink.truncated).toBe(true)
            const expected =
              bytes.subarray(0, head).toString('utf8') +
              droppedMarker(bytes.length - cap) +
              bytes.subarray(bytes.length - tail).toString('utf8')
            expect(out).toBe(expected)
          }
          expect(live).toBe(out)
        },
      ),
      { numRuns: 400 },
    )
  })

  test('bytes the sandbox dropped between the head and the tail it sent go in the marker', () => {
    const sink = new HeadTailSink(10)
    sink.push('aaaaabbbbb')
    sink.droppedInSandbox(90)
    expect(sink.truncated).toBe(true)
    expect(sink.finish()).toBe(`aaaaa${droppedMarker(90)}bbbbb`)
  })
})
