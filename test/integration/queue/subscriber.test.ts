import { once } from 'node:events'
import { randomUUID } from 'node:crypto'
import { Redis } from 'ioredis'
import { afterEach, expect, test } from 'vitest'
import { Subscriber } from '../../../src/queue/redis-common/subscriber.js'
import { REDIS_URL } from '../../support/redis.js'

const opened: Redis[] = []
afterEach(() => {
  for (const r of opened.splice(0)) r.disconnect()
})

function client(name: string): Redis {
  const r = new Redis(REDIS_URL, { connectionName: name, maxRetriesPerRequest: null })
  opened.push(r)
  return r
}

test.each(['pattern', 'channel'] as const)(
  'a %s handler added while the connection reconnects gets the very next message (it waits for the confirmed resubscription)',
  async (kind) => {
    const prefix = `sbxsubtest-${randomUUID().slice(0, 8)}:`
    const name = `sbx-subtest-${randomUUID().slice(0, 8)}`
    const raw = client(name)
    const id = (await raw.client('ID')) as number
    const sub = new Subscriber(raw, kind === 'pattern' ? prefix : undefined)
    const pub = client(`${name}-pub`)
    const channel = `${prefix}job-1`
    const offFirst = await sub.on(channel, () => undefined)
    // The server drops the subscriber's connection; ioredis reconnects and resubscribes.
    const closed = once(raw, 'close')
    await pub.client('KILL', 'ID', String(id))
    await closed
    expect(raw.status).not.toBe('ready')
    const got: string[] = []
    const off = await sub.on(channel, (m) => got.push(m))
    await pub.publish(channel, 'first after the reconnect')
    // A second message, published once the first was surely delivered if it was going to be.
    let markerSeen = (): void => undefined
    const marker = new Promise<void>((resolve) => (markerSeen = resolve))
    const offMarker = await sub.on(channel, (m) => m === 'marker' && markerSeen())
    await pub.publish(channel, 'marker')
    await marker
    await offMarker()
    expect(got).toEqual(['first after the reconnect', 'marker'])
    await off()
    await offFirst()
  },
)
