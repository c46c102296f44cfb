import { describe, expect, test } from 'vitest'
import { ChunkPublisher } from '../../../src/queue/redis-common/chunk-publisher.js'
import type { OutputChunk } from '../../../src/queue/schemas.js'

const chunk = (data: string): OutputChunk => ({ stream: 'stdout', data })

/** A Redis stand-in that refuses writes while `down`; resolves `drained` once `want` chunks landed. */
function sink(want: number) {
  const landed: string[] = []
  let down = false
  let done!: () => void
  const drained = new Promise<void>((r) => (done = r))
  const send = async (_job: string, c: OutputChunk): Promise<void> => {
    await Promise.resolve()
    if (down) throw new Error('Stream isn’t writeable and enableOfflineQueue options is false')
    landed.push(c.data)
    if (landed.length === want) done()
  }
  return { landed, drained, send, setDown: (d: boolean) => (down = d) }
}

describe('ChunkPublisher', () => {
  test('chunks Redis refused are sent again once it takes them, in order with the later ones', async () => {
    const s = sink(5)
    const p = new ChunkPublisher(s.send)
    p.publish('j', chunk('a'))
    s.setDown(true)
    p.publish('j', chunk('b'))
    p.publish('j', chunk('c'))
    await new Promise((r) => setImmediate(r))
    p.publish('j', chunk('d'))
    s.setDown(false)
    p.publish('j', chunk('e'))
    await s.drained
    expect(s.landed).toEqual(['a', 'b', 'c', 'd', 'e'])
    await expect.poll(() => p.idle).toBe(true)
  })

  test('past its bound (4 bytes here) a job keeps its first waiting chunk and the newest that fit', async () => {
    const s = sink(2)
    const p = new ChunkPublisher(s.send, 4)
    s.setDown(true)
    for (const d of ['aa', 'bb', 'cc', 'dd']) p.publish('j', chunk(d))
    await new Promise((r) => setImmediate(r))
    s.setDown(false)
    await s.drained
    expect(s.landed).toEqual(['aa', 'dd'])
  })
})
