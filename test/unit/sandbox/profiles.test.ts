import { describe, expect, test } from 'vitest'
import { ZodError } from 'zod'
import { LABELS, ProfileSchema, resolveProfile } from '../../../src/sandbox/index.js'

describe('profiles', () => {
  test('defaults are the hardened ones', () => {
    const p = resolveProfile('default', { provider: 'docker' })
    expect(p).toMatchObject({
      name: 'default',
      cpu: 1,
      memoryMb: 512,
      diskMb: 512,
      network: 'none',
      pidsLimit: 256,
      env: {},
      cwd: '/workspace',
      defaultTimeoutMs: 60_000,
      maxTimeoutMs: 600_000,
      outputCapBytes: 1_048_576,
      maxConcurrentExecs: 8,
      pool: { minIdle: 0 },
      readOnlyRoot: true,
      user: '1000:1000',
    })
    // No profile cap by default: the tenant quota (quotas.maxSandboxes) is what bounds a fleet.
    expect(p.pool.maxSize).toBeUndefined()
    expect(p.tmpMb).toBeUndefined()
  })

  test('a warm pool larger than the profile cap is rejected, naming minIdle', () => {
    const r = ProfileSchema.safeParse({ provider: 'docker', pool: { minIdle: 4, maxSize: 2 } })
    expect(r.success).toBe(false)
    expect(r.error?.issues[0]?.path).toEqual(['pool', 'minIdle'])
  })

  test('unknown keys are rejected (typos do not silently fall back to defaults)', () => {
    expect(() => resolveProfile('x', { provider: 'docker', memmoryMb: 10 } as never)).toThrow(ZodError)
  })

  test.each([
    [{ provider: '' }, 'provider'],
    [{ provider: 'docker', cpu: 0 }, 'cpu'],
    [{ provider: 'docker', network: 'host' }, 'network'],
    [{ provider: 'docker', cwd: 'relative' }, 'cwd'],
    [{ provider: 'docker', pidsLimit: 2 }, 'pidsLimit'],
    [{ provider: 'docker', defaultTimeoutMs: 2000, maxTimeoutMs: 1000 }, 'defaultTimeoutMs'],
    [{ provider: 'docker', pool: { minIdle: -1 } }, 'pool'],
  ])('invalid %j fails on %s', (input, field) => {
    const result = ProfileSchema.safeParse(input)
    expect(result.success).toBe(false)
    expect(result.error?.issues.map((i) => String(i.path[0]))).toContain(field)
  })

  test('bridge network is an explicit opt-out', () => {
    expect(resolveProfile('net', { provider: 'docker', network: 'bridge' }).network).toBe('bridge')
  })

  test('label keys are namespaced', () => {
    for (const key of Object.values(LABELS)) expect(key.startsWith('sandbox-router.')).toBe(true)
  })
})
