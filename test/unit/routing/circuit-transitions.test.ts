import { describe, expect, test } from 'vitest'
import { MemoryCircuitBreaker } from '../../../src/routing/circuit-breaker.js'
import type { CircuitTransition } from '../../../src/routing/circuit-breaker.js'
import { circuitEvent } from '../../../src/routing/circuit-events.js'

describe('MemoryCircuitBreaker transitions', () => {
  test('tells open, half-open (first probe only), re-open and closed, each once', async () => {
    let now = 0
    const seen: CircuitTransition[] = []
    const b = new MemoryCircuitBreaker(
      { failureThreshold: 2, cooldownMs: 1_000 },
      () => now,
      (t) => seen.push(t),
    )
    await b.failure('p', 'x')
    expect(seen).toEqual([])
    await b.failure('p', '429 rate limited')
    await b.failure('p', 'late failure of a call that started before') // already open: no event
    expect(seen).toEqual([
      {
        provider: 'p',
        from: 'closed',
        to: 'open',
        failures: 2,
        reason: '2 consecutive failed create(s); last: 429 rate limited',
        openUntil: 1_000,
      },
    ])
    now = 1_500
    expect(await b.allow('p')).toBe(true)
    expect(await b.allow('p')).toBe(false)
    await b.failure('p', 'still down')
    now = 3_000
    expect(await b.allow('p')).toBe(true)
    await b.success('p')
    await b.success('p') // closed already: no event
    expect(seen.map((t) => `${t.from}→${t.to}`)).toEqual([
      'closed→open',
      'open→half-open',
      'half-open→open',
      'open→half-open',
      'half-open→closed',
    ])
    expect(seen[2]?.reason).toBe('the half-open probe failed: still down')
    expect(seen[4]).toMatchObject({ failures: 0, reason: 'a create succeeded' })
  })

  test('a listener that throws does not break routing', async () => {
    const b = new MemoryCircuitBreaker({ failureThreshold: 1, cooldownMs: 1_000 }, Date.now, () => {
      throw new Error('observer bug')
    })
    await expect(b.failure('p', 'x')).resolves.toBeUndefined()
    expect((await b.state('p')).state).toBe('open')
  })

  test('the lifecycle event names the provider and the reason', () => {
    const e = circuitEvent(
      { provider: 'daytona', from: 'closed', to: 'open', failures: 3, reason: 'r', openUntil: 9 },
      5,
    )
    expect(e).toEqual({
      type: 'CIRCUIT_OPEN',
      runtime: 'router',
      step: 0,
      message: 'daytona',
      attributes: { provider: 'daytona', from: 'closed', to: 'open', failures: 3, reason: 'r', openUntil: 9 },
      timestamp: 5,
    })
  })
})
