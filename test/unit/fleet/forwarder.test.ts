import { describe, expect, test } from 'vitest'
import { GatewayMissed } from '../../../src/fleet/client.js'
import { EngineForwarder } from '../../../src/fleet/forwarder.js'
import type { EngineDirectory } from '../../../src/queue/engines/engine-directory.js'

/**
 * A forwarder over a fake directory: session `s1` of tenant `a` is placed on engine `E2`, whose live
 * workers' gateways are `live` and whose record (the last writer's) names `recordUrl`.
 */
function forwarder(opts: {
  live: string[]
  recordUrl?: string
  state?: 'live' | 'down'
  draining?: boolean
}) {
  const engines = {
    staleMs: 200,
    place: async () => ({ engineId: 'E2', how: 'kept' as const }),
    engine: async (id: string) => ({
      id,
      seenAt: Date.now(),
      healthy: opts.state !== 'down',
      running: 0,
      workerId: 'w',
      state: opts.state ?? 'live',
      draining: opts.draining ?? false,
      ...(opts.recordUrl === undefined ? {} : { gatewayUrl: opts.recordUrl }),
    }),
    gateways: async () => opts.live,
  } as unknown as EngineDirectory
  return new EngineForwarder({
    engines,
    directory: { get: async () => ({ provider: 'docker', profile: 'default' }) },
    localEngineId: 'E1',
    secret: 's'.repeat(32),
    engineBound: () => true,
    memoryOf: () => 0,
  })
}

describe('EngineForwarder', () => {
  test("a call goes to a live worker's own gateway, not to the record's last writer", async () => {
    const fw = forwarder({ live: ['http://live'], recordUrl: 'http://dead' })
    const sent: string[] = []
    const value = await fw.route(
      'a',
      's1',
      () => Promise.reject(new Error('not local')),
      async (url) => (sent.push(url), 'ok'),
    )
    expect(value).toBe('ok')
    expect(sent).toEqual(['http://live'])
  })

  test('a gateway that refuses at connect is not tried again in that call: the next live one is', async () => {
    for (let i = 0; i < 10; i++) {
      const fw = forwarder({ live: ['http://dead', 'http://live'] })
      const sent: string[] = []
      const value = await fw.route(
        'a',
        's1',
        () => Promise.reject(new Error('not local')),
        async (url) => {
          sent.push(url)
          if (url === 'http://dead') throw new GatewayMissed('refused')
          return 'ok'
        },
      )
      expect(value).toBe('ok')
      expect(sent.at(-1)).toBe('http://live')
      expect(sent.filter((u) => u === 'http://dead').length).toBeLessThanOrEqual(1)
    }
  })

  test("what lives on one engine is refused with the engine's state when it is drained or down", async () => {
    const call = (fw: EngineForwarder) =>
      fw.onEngine(
        'snapshot snap-1',
        'E2',
        { drained: false },
        () => Promise.resolve('local'),
        () => Promise.resolve('remote'),
      )
    await expect(call(forwarder({ live: ['http://live'] }))).resolves.toBe('remote')
    await expect(call(forwarder({ live: ['http://live'], draining: true }))).rejects.toMatchObject({
      code: 'UNAVAILABLE',
      message: expect.stringMatching(/snapshot snap-1 lives on Docker engine E2, which is drained/),
    })
    await expect(call(forwarder({ live: [], state: 'down' }))).rejects.toMatchObject({
      code: 'UNAVAILABLE',
      retryable: true,
      message: expect.stringMatching(/which is down/),
    })
    // The engine of this process: in place.
    await expect(
      forwarder({ live: [] }).onEngine(
        'x',
        'E1',
        { drained: false },
        () => Promise.resolve('local'),
        () => Promise.resolve('remote'),
      ),
    ).resolves.toBe('local')
  })
})
