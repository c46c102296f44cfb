import { describe, expect, test } from 'vitest'
import { AppError } from '../../../src/errors.js'
import type { Sandbox, SandboxProvider, SandboxRef } from '../../../src/sandbox/types.js'
import {
  backoffDelayMs,
  CREATE_LATENCY_BUCKETS_MS,
  poolKey,
  SessionPoolOptionsSchema,
  sessionHash,
} from '../../../src/sessions/index.js'
import { Deadline } from '../../../src/sessions/deadline.js'
import { HandleCache } from '../../../src/sessions/handles.js'
import { PoolCounters } from '../../../src/sessions/stats.js'

describe('backoffDelayMs', () => {
  const b = { initialMs: 100, maxMs: 1_000, factor: 2 }
  test('grows exponentially with equal jitter and is capped', () => {
    expect(backoffDelayMs(0, b, () => 0)).toBe(50)
    expect(backoffDelayMs(0, b, () => 1)).toBe(100)
    expect(backoffDelayMs(2, b, () => 0)).toBe(200)
    expect(backoffDelayMs(2, b, () => 1)).toBe(400)
    expect(backoffDelayMs(10, b, () => 1)).toBe(1_000)
    expect(backoffDelayMs(10, b, () => 0)).toBe(500)
  })
})

describe('SessionPoolOptionsSchema', () => {
  test('fills defaults and rejects unknown or invalid options', () => {
    const o = SessionPoolOptionsSchema.parse({})
    expect(o).toMatchObject({ scope: 'default', acquireTimeoutMs: 30_000, createAttempts: 5, prewarm: [] })
    expect(o.createBackoff).toEqual({ initialMs: 100, maxMs: 5_000, factor: 2 })
    expect(() => SessionPoolOptionsSchema.parse({ acquireTimeout: 5 })).toThrow()
    expect(() => SessionPoolOptionsSchema.parse({ leaseTtlMs: 10 })).toThrow()
  })
})

describe('keys', () => {
  test('a session hash is stable, separator-safe, and differs per key part', () => {
    const k = { tenant: 'a', sessionId: 's', providerId: 'docker', profile: 'p' }
    expect(sessionHash(k)).toBe(sessionHash({ ...k }))
    expect(sessionHash(k)).toMatch(/^[0-9a-f]{32}$/)
    expect(sessionHash({ ...k, tenant: 'a:s', sessionId: '' })).not.toBe(
      sessionHash({ ...k, tenant: 'a', sessionId: 's:' }),
    )
    expect(
      new Set([k, { ...k, tenant: 'b' }, { ...k, sessionId: 't' }, { ...k, profile: 'q' }].map(sessionHash))
        .size,
    ).toBe(4)
    expect(poolKey('docker', 'p')).toBe('docker/p')
  })
})

describe('Deadline', () => {
  test('times out with ACQUIRE_TIMEOUT naming the target and the last error', async () => {
    const dl = new Deadline(20, [], "provider 'docker', profile 'p'")
    dl.lastError = new Error('engine says no')
    const err = await dl.race(new Promise(() => {})).catch((e: unknown) => e)
    expect(err).toBeInstanceOf(AppError)
    expect(err).toMatchObject({ code: 'ACQUIRE_TIMEOUT', retryable: true })
    expect((err as Error).message).toMatch(
      /provider 'docker', profile 'p' within 20 ms; last error: engine says no/,
    )
    dl.dispose()
  })

  test("a caller's abort surfaces as its own reason; a linked deadline receives the last error", () => {
    const c = new AbortController()
    const parent = new Deadline(10_000, [], 'x')
    const dl = new Deadline(10_000, [c.signal], 'x', parent)
    dl.lastError = 'boom'
    expect(parent.lastError).toBe('boom')
    c.abort(new Error('stop'))
    expect(() => dl.check()).toThrow('stop')
    dl.dispose()
    parent.dispose()
  })
})

describe('HandleCache', () => {
  function fakeSandbox(id: string, closed: string[]): Sandbox {
    const ref: SandboxRef = { providerId: 'p', id, profile: 'x' }
    return {
      ref,
      exec: () => Promise.reject(new Error('unused')),
      writeFile: () => Promise.resolve(),
      readFile: () => Promise.resolve(new Uint8Array()),
      health: () => Promise.resolve({ ok: true }),
      close: () => {
        closed.push(id)
        return Promise.resolve()
      },
    }
  }

  test('one connection per sandbox shared by callers; failures are not cached; idle handles close', async () => {
    const closed: string[] = []
    let connects = 0
    let fail = true
    const provider = {
      connect: async (ref: SandboxRef) => {
        connects++
        if (fail) throw new AppError('SANDBOX_LOST', 'gone')
        return fakeSandbox(ref.id, closed)
      },
    } as Pick<SandboxProvider, 'connect'> as SandboxProvider
    const cache = new HandleCache()
    const ref = { providerId: 'p', id: 'a', profile: 'x' }
    await expect(cache.use(ref, provider)).rejects.toMatchObject({ code: 'SANDBOX_LOST' })
    fail = false
    const [h1, h2] = await Promise.all([cache.use(ref, provider), cache.use(ref, provider)])
    expect(h1).toBe(h2)
    expect(connects).toBe(2)
    await cache.closeIdle(Date.now() + 10_000, 1_000)
    expect(closed).toEqual([]) // still in use
    cache.unuse('a')
    cache.unuse('a')
    await cache.closeIdle(Date.now() + 10_000, 1_000)
    expect(closed).toEqual(['a'])
    expect(cache.size).toBe(0)
  })
})

describe('PoolCounters', () => {
  test('create latency is a cumulative histogram', () => {
    const c = new PoolCounters()
    c.observeCreate(40)
    c.observeCreate(700)
    c.observeCreate(60_000)
    const s = c.snapshot({ leases: 0, handles: 0 })
    expect(s.creates).toBe(3)
    expect(s.createLatency.sumMs).toBe(60_740)
    expect(s.createLatency.bucketsMs).toEqual([...CREATE_LATENCY_BUCKETS_MS])
    expect(s.createLatency.counts).toEqual([1, 1, 1, 1, 2, 2, 2, 2, 3])
  })
})
