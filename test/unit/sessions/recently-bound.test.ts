import { describe, expect, test } from 'vitest'
import { BOUND_SEEN_TTL_MS, RecentlyBound } from '../../../src/sessions/recently-bound.js'

describe('RecentlyBound', () => {
  test('a session seen bound is remembered for the window, then asked again', () => {
    const seen = new RecentlyBound()
    expect(seen.has('s1', 0)).toBe(false)
    seen.add('s1', 1_000)
    expect(seen.has('s1', 1_000)).toBe(true)
    expect(seen.has('s1', 1_000 + BOUND_SEEN_TTL_MS - 1)).toBe(true)
    expect(seen.has('s1', 1_000 + BOUND_SEEN_TTL_MS)).toBe(false)
    // Expired entries are dropped: seen again, the window starts anew.
    seen.add('s1', 5_000)
    expect(seen.has('s1', 5_000 + BOUND_SEEN_TTL_MS - 1)).toBe(true)
  })

  test('forget drops a session at once; other sessions stay', () => {
    const seen = new RecentlyBound()
    seen.add('s1', 0)
    seen.add('s2', 0)
    seen.forget('s1')
    expect(seen.has('s1', 1)).toBe(false)
    expect(seen.has('s2', 1)).toBe(true)
  })

  test('memory is bounded: past 10,000 sessions the set starts over', () => {
    const seen = new RecentlyBound()
    for (let i = 0; i < 10_000; i++) seen.add(`s${i}`, 0)
    expect(seen.has('s0', 1)).toBe(true)
    seen.add('one more', 0)
    expect(seen.has('s0', 1)).toBe(false)
    expect(seen.has('one more', 1)).toBe(true)
  })
})
