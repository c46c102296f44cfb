import { describe, expect, test } from 'vitest'
import { Semaphore } from '../../../src/sandbox/semaphore.js'

describe('Semaphore (the per-sandbox exec bound every provider uses)', () => {
  test('grants up to its size, then queues in order; release is idempotent', async () => {
    const s = new Semaphore(2)
    const a = await s.acquire()
    const b = await s.acquire()
    const order: string[] = []
    const c = s.acquire().then((r) => (order.push('c'), r))
    const d = s.acquire().then((r) => (order.push('d'), r))
    a()
    a() // a second release frees nothing more
    const rc = await c
    expect(order).toEqual(['c'])
    b()
    const rd = await d
    expect(order).toEqual(['c', 'd'])
    rc()
    rd()
    // Both slots are free again.
    const [x, y] = await Promise.all([s.acquire(), s.acquire()])
    x()
    y()
  })

  test('an aborted waiter leaves the queue with the abort reason and takes no slot', async () => {
    const s = new Semaphore(1)
    const held = await s.acquire()
    const ac = new AbortController()
    const waiting = s.acquire(ac.signal)
    ac.abort(new Error('caller went away'))
    await expect(waiting).rejects.toThrow('caller went away')
    held()
    const next = await s.acquire()
    next()
    await expect(s.acquire(AbortSignal.abort(new Error('already')))).rejects.toThrow('already')
  })
})
