import { describe, expect, test } from 'vitest'
import { lifecyclePolicyOf } from '../../../src/http/e2b/lifecycle.js'
import { applyListQuery, parseListQuery } from '../../../src/http/e2b/list-query.js'
import type { E2BSandbox } from '../../../src/http/e2b/sandboxes.js'
import { statsOf } from '../../../providers/docker/stats.js'

describe("an E2B create's lifecycle policy", () => {
  test('the default is kill; autoPause pauses, with memory or filesystem-only, with or without autoResume', () => {
    expect(lifecyclePolicyOf({})).toEqual({})
    expect(lifecyclePolicyOf({ autoPause: false })).toEqual({})
    expect(lifecyclePolicyOf({ autoPause: true })).toEqual({ onTimeout: 'pause' })
    expect(lifecyclePolicyOf({ autoPause: true, autoPauseMemory: false })).toEqual({
      onTimeout: 'pause',
      autoPauseFilesystemOnly: true,
    })
    expect(lifecyclePolicyOf({ autoPause: true, autoResume: { enabled: true } })).toEqual({
      onTimeout: 'pause',
      autoResume: true,
    })
  })
  test('combinations E2B refuses, and wrong shapes, are 400s that say why', () => {
    expect(() => lifecyclePolicyOf({ autoResume: { enabled: true } })).toThrow(
      /autoResume needs autoPause: true/,
    )
    expect(() =>
      lifecyclePolicyOf({ autoPause: true, autoPauseMemory: false, autoResume: { enabled: true } }),
    ).toThrow(/filesystem-only pause is resumed by Sandbox.connect only/)
    expect(() => lifecyclePolicyOf({ autoPause: 'yes' })).toThrow(/autoPause must be a boolean/)
    expect(() => lifecyclePolicyOf({ autoPause: true, autoResume: true })).toThrow(/\{ enabled: boolean \}/)
  })
})

describe("E2B's list filters", () => {
  const at = (iso: string, id: string, templateId = 'base'): E2BSandbox => ({
    sandboxId: id,
    tenant: 't',
    templateId,
    profile: 'e2b',
    provider: 'docker',
    cwd: '/home/user',
    metadata: { app: 'x' },
    envVars: {},
    accessToken: 'tok',
    startedAt: new Date(iso),
    endAt: new Date(Date.parse(iso) + 60_000),
  })
  // As the store lists them: newest first.
  const all = [
    at('2026-01-03T00:00:00Z', 'c', 'py'),
    at('2026-01-02T00:00:00Z', 'b'),
    at('2026-01-01T00:00:00Z', 'a'),
  ]
  const ids = (q: Record<string, string>) =>
    applyListQuery(
      all,
      parseListQuery((n) => q[n]),
    ).map((s) => s.sandboxId)

  test('order, startedAfter (inclusive), template, metadata', () => {
    expect(ids({})).toEqual(['c', 'b', 'a'])
    expect(ids({ order: 'asc' })).toEqual(['a', 'b', 'c'])
    expect(ids({ startedAfter: '2026-01-02T00:00:00.000Z' })).toEqual(['c', 'b'])
    expect(ids({ template: 'base', order: 'asc' })).toEqual(['a', 'b'])
    expect(ids({ template: 'nope' })).toEqual([])
    expect(ids({ metadata: 'app=x', state: 'running' })).toEqual(['c', 'b', 'a'])
    expect(ids({ state: 'paused' })).toEqual([])
  })
  test('bad values name the field', () => {
    expect(() => ids({ order: 'up' })).toThrow(/order must be 'asc' or 'desc'/)
    expect(() => ids({ startedAfter: 'yesterday' })).toThrow(/startedAfter must be an RFC 3339 time/)
    expect(() => ids({ state: 'gone' })).toThrow(/state 'gone' is not one of: running, paused/)
  })
})

describe("the engine's stats as sandbox figures", () => {
  test('CPU share of the sandbox CPUs, memory without inactive file pages', () => {
    const raw = {
      cpu_stats: {
        cpu_usage: { total_usage: 1_500_000_000 },
        system_cpu_usage: 12_000_000_000,
        online_cpus: 2,
      },
      precpu_stats: { cpu_usage: { total_usage: 1_000_000_000 }, system_cpu_usage: 10_000_000_000 },
      memory_stats: { usage: 300, limit: 1_000, stats: { total_inactive_file: 100, total_cache: 150 } },
    }
    // 0.5 s of CPU in 1 s of wall time (2 s of host CPU time on 2 CPUs): half of one CPU.
    expect(statsOf(raw, 1e9)).toEqual({
      cpuUsedPct: 50,
      cpuCount: 1,
      memUsedBytes: 200,
      memTotalBytes: 1_000,
      memCacheBytes: 150,
    })
    // Without a CPU limit: the host's CPUs.
    expect(statsOf(raw, 0)).toMatchObject({ cpuCount: 2, cpuUsedPct: 25 })
  })
})
