import { describe, expect, test } from 'vitest'
import { OutputCursor, OutputLog, parseLoggedMessage } from '../../../src/queue/output-log.js'
import type { OutputDelivery } from '../../../src/queue/output-log.js'

describe('numbered live output and resuming readers', () => {
  test('chunks are numbered by bytes (UTF-8, both streams together); the log drops the oldest past its cap', () => {
    const log = new OutputLog(10)
    expect(log.append({ stream: 'stdout', data: 'abc' }).offset).toBe(3)
    expect(log.append({ stream: 'stderr', data: 'é' }).offset).toBe(5)
    expect(log.append({ stream: 'stdout', data: '123456' }).offset).toBe(11)
    expect(log.retained().map((c) => c.offset)).toEqual([5, 11])
  })

  test('a cursor delivers each chunk once, in order, and reports a gap once', () => {
    const got: OutputDelivery[] = []
    const cursor = new OutputCursor(2, (d) => got.push(d))
    cursor.push({ stream: 'stdout', data: 'ab', offset: 2 })
    cursor.push({ stream: 'stdout', data: 'cd', offset: 6 })
    cursor.push({ stream: 'stdout', data: 'cd', offset: 6 })
    cursor.push({ stream: 'stderr', data: 'xyz', offset: 9 })
    expect(got).toEqual([
      { kind: 'missed', bytes: 2, offset: 4 },
      { kind: 'chunk', chunk: { stream: 'stdout', data: 'cd', offset: 6 } },
      { kind: 'chunk', chunk: { stream: 'stderr', data: 'xyz', offset: 9 } },
    ])
    const inside: OutputDelivery[] = []
    new OutputCursor(7, (d) => inside.push(d)).push({ stream: 'stderr', data: 'xyz', offset: 9 })
    expect(inside).toEqual([{ kind: 'chunk', chunk: { stream: 'stderr', data: 'yz', offset: 9 } }])
  })

  test('the Redis message form round-trips; anything else is not a chunk', () => {
    expect(parseLoggedMessage('o12\nline\nmore')).toEqual({
      stream: 'stdout',
      data: 'line\nmore',
      offset: 12,
    })
    expect(parseLoggedMessage('e3\nerr')).toEqual({ stream: 'stderr', data: 'err', offset: 3 })
    expect(parseLoggedMessage('d{"status":"completed"}')).toBeUndefined()
    expect(parseLoggedMessage('ohello')).toBeUndefined()
  })
})
