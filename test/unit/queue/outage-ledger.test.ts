import { EventEmitter } from 'node:events'
import { afterEach, describe, expect, test, vi } from 'vitest'
import { OutageLedger } from '../../../src/queue/redis-common/outage-ledger.js'
import type { ExecJobResult } from '../../../src/queue/schemas.js'
import type { FenceOutcome, JobFence } from '../../../src/queue/types.js'

/** A stand-in for the fence client: `status` and its `close` events are all the ledger reads. */
class FakeClient extends EventEmitter {
  status = 'ready'
  drop(): void {
    this.status = 'reconnecting'
    this.emit('close')
  }
  back(): void {
    this.status = 'ready'
  }
}

/** A distinguishable result (its shape does not matter to the ledger). */
const ok = (reason: string): ExecJobResult => ({ status: 'cancelled', reason })

afterEach(() => {
  vi.useRealTimers()
})

describe('OutageLedger', () => {
  test('an attempt no outage touched leaves nothing behind', async () => {
    const ledger = new OutageLedger(new FakeClient())
    const a = ledger.track('j1')
    expect(ledger.active).toBe(1)
    expect(a.outageTouched()).toBe(false)
    a.end()
    expect(ledger.active).toBe(0)
    expect(ledger.takeResult('j1')).toBeUndefined()
  })

  test('a fence-client drop during the attempt marks it touched, even once reconnected', () => {
    const client = new FakeClient()
    const ledger = new OutageLedger(client)
    const before = ledger.track('j1')
    client.drop()
    client.back()
    expect(before.outageTouched()).toBe(true)
    // An attempt that starts after the drop, with the client ready, is not touched.
    expect(ledger.track('j2').outageTouched()).toBe(false)
  })

  test('an attempt is touched while the fence client is not ready', () => {
    const client = new FakeClient()
    const ledger = new OutageLedger(client)
    client.status = 'connecting'
    expect(ledger.track('j1').outageTouched()).toBe(true)
  })

  test('a kept result goes to the next delivery once, and only once', async () => {
    const ledger = new OutageLedger(new FakeClient())
    const a = ledger.track('j1')
    a.keep(ok('one'))
    a.end()
    expect(await ledger.takeResult('j1')).toEqual(ok('one'))
    expect(ledger.takeResult('j1')).toBeUndefined()
  })

  test('a redelivery during a running attempt waits for its outcome', async () => {
    const ledger = new OutageLedger(new FakeClient())
    const a = ledger.track('j1')
    const taken = ledger.takeResult('j1')
    expect(taken).toBeInstanceOf(Promise)
    a.keep(ok('late'))
    a.end()
    expect(await taken).toEqual(ok('late'))
    expect(ledger.takeResult('j1')).toBeUndefined()
  })

  test('a running attempt that ends without a result hands the redelivery nothing', async () => {
    const ledger = new OutageLedger(new FakeClient())
    const a = ledger.track('j1')
    const taken = ledger.takeResult('j1')
    a.end()
    expect(await taken).toBeUndefined()
    expect(ledger.takeResult('j1')).toBeUndefined()
  })

  test('kept results expire, and the oldest go first at the cap (the finishing attempt counts)', async () => {
    vi.useFakeTimers()
    const ledger = new OutageLedger(new FakeClient(), { keepResultMs: 1_000, maxKeptResults: 3 })
    for (const id of ['a', 'b', 'c']) {
      const t = ledger.track(id)
      t.keep(ok(id))
      t.end()
    }
    expect(ledger.takeResult('a')).toBeUndefined()
    expect(await ledger.takeResult('b')).toEqual(ok('b'))
    vi.advanceTimersByTime(1_000)
    expect(ledger.takeResult('c')).toBeUndefined()
  })

  test('a failed fence begin marks the job unstarted, once', async () => {
    const ledger = new OutageLedger(new FakeClient())
    const down = new Error('Connection is closed.')
    const fence: JobFence = {
      inspect: async () => ({ kind: 'run' }) satisfies FenceOutcome,
      begin: async () => {
        throw down
      },
      finish: async (r) => r,
    }
    const watched = ledger.watchBegin('j1', fence)
    await expect(watched.begin({})).rejects.toBe(down)
    expect(ledger.takeUnstarted('j1')).toBe(true)
    expect(ledger.takeUnstarted('j1')).toBe(false)
  })

  test('a fence begin that succeeds marks nothing', async () => {
    const ledger = new OutageLedger(new FakeClient())
    const outcome: FenceOutcome = { kind: 'run' }
    const fence: JobFence = {
      inspect: async () => outcome,
      begin: async () => outcome,
      finish: async (r) => r,
    }
    expect(await ledger.watchBegin('j1', fence).begin({})).toBe(outcome)
    expect(ledger.takeUnstarted('j1')).toBe(false)
  })

  test('unstarted marks are dropped wholesale past the cap', () => {
    const ledger = new OutageLedger(new FakeClient(), { maxKeptResults: 2 })
    ledger.markUnstarted('a')
    ledger.markUnstarted('b')
    ledger.markUnstarted('c')
    expect(ledger.takeUnstarted('a')).toBe(false)
    expect(ledger.takeUnstarted('b')).toBe(false)
    expect(ledger.takeUnstarted('c')).toBe(true)
  })

  test('whenIdle resolves when the last attempt ends', async () => {
    const ledger = new OutageLedger(new FakeClient())
    await ledger.whenIdle()
    const a = ledger.track('a')
    const b = ledger.track('b')
    let idle = false
    const waiting = ledger.whenIdle().then(() => (idle = true))
    a.end()
    await Promise.resolve()
    expect(idle).toBe(false)
    b.end()
    await waiting
    expect(idle).toBe(true)
  })

  test('dispose stops counting drops', () => {
    const client = new FakeClient()
    const ledger = new OutageLedger(client)
    const a = ledger.track('a')
    ledger.dispose()
    client.emit('close')
    expect(a.outageTouched()).toBe(false)
    expect(client.listenerCount('close')).toBe(0)
  })
})
