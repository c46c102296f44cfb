import { describe, expect, test } from 'vitest'
import { ChunkHold } from '../../../src/queue/redis/chunk-hold.js'
import type { OutputChunk } from '../../../src/queue/index.js'

const chunk = (data: string): OutputChunk => ({ stream: 'stdout', data })

describe('ChunkHold', () => {
  test('the finish takes the held chunk: it is not sent on its own', () => {
    const sent: OutputChunk[] = []
    const hold = new ChunkHold((c) => sent.push(c))
    hold.publish(chunk('hi\n'))
    expect(hold.take()).toEqual(chunk('hi\n'))
    expect(hold.take()).toBeUndefined()
    expect(sent).toEqual([])
  })

  test('a new chunk sends the held one at once, in order; only the last waits', () => {
    const sent: OutputChunk[] = []
    const hold = new ChunkHold((c) => sent.push(c))
    hold.publish(chunk('one\n'))
    hold.publish(chunk('two\n'))
    hold.publish(chunk('three\n'))
    expect(sent).toEqual([chunk('one\n'), chunk('two\n')])
    hold.flush()
    expect(sent).toEqual([chunk('one\n'), chunk('two\n'), chunk('three\n')])
  })

  test('a chunk no finish takes goes out by itself', async () => {
    const sent = new Promise<OutputChunk>((resolve) => {
      const hold = new ChunkHold(resolve, 2)
      hold.publish(chunk('late\n'))
    })
    expect(await sent).toEqual(chunk('late\n'))
  })
})
