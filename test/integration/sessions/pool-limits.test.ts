import { performance } from 'node:perf_hooks'
import { describe, expect } from 'vitest'
import { AppError } from '../../../src/errors.js'
import type { SandboxProvider } from '../../../src/sandbox/types.js'
import { key, poolTest as test, waitFor } from '../../support/pool-env.js'

/**
 * The real Docker provider, whose create failures are reported as transient (as an engine under
 * load would): the profile `no-image` names an image that does not exist, so every create fails
 * for real. Records when each create started.
 */
function transientFailures(real: SandboxProvider): SandboxProvider & { starts: number[] } {
  const starts: number[] = []
  return {
    id: real.id,
    starts,
    create: async (profile, opts) => {
      starts.push(performance.now())
      try {
        return await real.create(profile, opts)
      } catch (err) {
        const message = err instanceof Error ? err.message : String(err)
        throw new AppError('SANDBOX_CREATE_FAILED', message, { retryable: true, cause: err })
      }
    },
    connect: (ref, o) => real.connect(ref, o),
    list: (f) => real.list(f),
    destroy: (ref) => real.destroy(ref),
  }
}

describe('session pool: limits and failures (real Docker, real Redis)', () => {
  test('create keeps failing (transient): backoff between attempts, then SANDBOX_CREATE_FAILED naming provider, profile and cause', async ({
    env,
  }) => {
    const flaky = transientFailures(env.docker)
    const pool = env.pool({
      providers: [flaky],
      createAttempts: 4,
      createBackoff: { initialMs: 40, maxMs: 400, factor: 2 },
    })
    const t0 = performance.now()
    const err = await pool.acquire(key('no-image', 's'), { timeoutMs: 10_000 }).catch((e: unknown) => e)
    const elapsed = performance.now() - t0
    expect(err).toBeInstanceOf(AppError)
    expect(err).toMatchObject({ code: 'SANDBOX_CREATE_FAILED', retryable: true })
    const message = (err as AppError).message
    expect(message).toContain("provider 'docker', profile 'no-image'")
    expect(message).toContain('4 attempt(s)')
    expect(message).toContain('sandbox-router/does-not-exist:latest')
    expect(flaky.starts).toHaveLength(4)
    // Equal jitter: each gap is at least half the exponential step (20, 40, 80 ms).
    const gaps = flaky.starts.slice(1).map((s, i) => s - (flaky.starts[i] ?? 0))
    gaps.forEach((gap, i) => expect(gap).toBeGreaterThanOrEqual(20 * 2 ** i - 1))
    expect(elapsed).toBeLessThan(10_000)
    expect(pool.stats()).toMatchObject({ createFailures: 4, acquireFailures: 1, creates: 0 })
    expect(await env.containers()).toEqual([])
  })

  test('create keeps failing past the deadline: ACQUIRE_TIMEOUT on time, with the last error, no spin', async ({
    env,
  }) => {
    const flaky = transientFailures(env.docker)
    const pool = env.pool({ providers: [flaky], createAttempts: 1_000 })
    const t0 = performance.now()
    const err = await pool.acquire(key('no-image'), { timeoutMs: 1_500 }).catch((e: unknown) => e)
    const elapsed = performance.now() - t0
    expect(err).toMatchObject({ code: 'ACQUIRE_TIMEOUT' })
    expect((err as AppError).message).toContain('within 1500 ms')
    expect((err as AppError).message).toContain('does-not-exist')
    expect(elapsed).toBeGreaterThanOrEqual(1_490)
    expect(elapsed).toBeLessThan(3_000)
    // Backoff 100, 200, 400, 800 ms...: a handful of attempts, not a busy loop.
    expect(flaky.starts.length).toBeGreaterThan(1)
    expect(flaky.starts.length).toBeLessThan(10)
  })

  test('a non-retryable create error (the real one) fails fast after one attempt, with the setup hint', async ({
    env,
  }) => {
    const pool = env.pool()
    const t0 = performance.now()
    const err = await pool.acquire(key('no-image', 's')).catch((e: unknown) => e)
    expect(err).toMatchObject({ code: 'SANDBOX_CREATE_FAILED', retryable: false })
    expect((err as AppError).message).toMatch(
      /1 attempt\(s\).*is not on the Docker engine at .*sbx image build/,
    )
    expect(performance.now() - t0).toBeLessThan(5_000)
    expect(pool.stats().createFailures).toBe(1)
  })

  test('per-tenant quota: QUOTA_EXCEEDED past maxSandboxesPerTenant, other tenants unaffected, close frees a slot', async ({
    env,
  }) => {
    const pool = env.pool({ maxSandboxesPerTenant: 2 })
    const a = await pool.acquire(key('plain', 's1'))
    const b = await pool.acquire(key('plain', 's2'))
    await expect(pool.acquire(key('plain', 's3'))).rejects.toMatchObject({
      code: 'QUOTA_EXCEEDED',
      message: expect.stringContaining(
        "tenant 'acme' holds 2 sandbox(es), its maximum (quotas.maxSandboxes = 2",
      ),
    })
    await expect(pool.acquire(key('plain'))).rejects.toMatchObject({ code: 'QUOTA_EXCEEDED' })
    // Reusing a bound session needs no new slot.
    const again = await pool.acquire(key('plain', 's1'))
    expect(again.ref.id).toBe(a.ref.id)
    const other = await pool.acquire(key('plain', 's1', 'globex'))
    await Promise.all([a.release(), b.release(), again.release(), other.release()])
    await pool.close(key('plain', 's1'))
    const c = await pool.acquire(key('plain', 's3'))
    await c.release()
    expect(pool.stats().quotaRejections).toBe(2)
  })

  test('the quota also holds for warm claims and across two workers', async ({ env }) => {
    const a = env.pool({ maxSandboxesPerTenant: 1, prewarm: [{ providerId: 'docker', profile: 'warm' }] })
    const b = env.pool({ maxSandboxesPerTenant: 1, providers: [env.newDocker()] })
    await waitFor(
      async () => {
        await a.warmSettled()
        return (a.stats().current.warm['docker/warm'] ?? 0) >= 4
      },
      20_000,
      'warm pool',
    )
    const first = await a.acquire(key('warm', 's1'))
    expect(first.hit).toBe(true)
    await expect(b.acquire(key('warm', 's2'))).rejects.toMatchObject({ code: 'QUOTA_EXCEEDED' })
    await expect(a.acquire(key('warm'))).rejects.toMatchObject({ code: 'QUOTA_EXCEEDED' })
    await first.release()
  })

  test('a session seen bound is admitted from memory for a moment; closed elsewhere meanwhile, the acquire still holds the quota', async ({
    env,
  }) => {
    const api = env.pool({ maxSandboxesPerTenant: 1 })
    const worker = env.pool({ maxSandboxesPerTenant: 1, providers: [env.newDocker()] })
    await (await worker.acquire(key('plain', 's1'))).release()
    await api.admit(key('plain', 's1'))
    // Another process closes s1 and gives the tenant's one slot to s2.
    await worker.close(key('plain', 's1'))
    const s2 = await worker.acquire(key('plain', 's2'))
    await s2.release()
    // The API may still admit s1 from memory for up to a second (advisory); the sandbox s1 would
    // need is refused for real.
    await expect(worker.acquire(key('plain', 's1'))).rejects.toMatchObject({ code: 'QUOTA_EXCEEDED' })
    // A session this process closes is forgotten at once: its next admission asks the store.
    await api.admit(key('plain', 's2'))
    await api.close(key('plain', 's2'))
    await (await worker.acquire(key('plain', 's3'))).release()
    await expect(api.admit(key('plain', 's2'))).rejects.toMatchObject({ code: 'QUOTA_EXCEEDED' })
    await worker.close(key('plain', 's3'))
  })

  test('profile cap (pool.maxSize): a new session past it fails at once, naming the config key; close frees room', async ({
    env,
  }) => {
    const pool = env.pool()
    const held = await pool.acquire(key('single', 's1'))
    const t0 = Date.now()
    const err = await pool.acquire(key('single', 's2'), { timeoutMs: 10_000 }).catch((e: unknown) => e)
    expect(Date.now() - t0).toBeLessThan(2_000)
    expect(err).toMatchObject({ code: 'QUOTA_EXCEEDED' })
    expect((err as AppError).message).toContain('profiles.single.pool.maxSize = 1')
    expect((err as AppError).message).toContain('DELETE /v1/sessions/<id>')
    await expect(pool.admit(key('single', 's2'))).rejects.toMatchObject({ code: 'QUOTA_EXCEEDED' })
    await pool.admit(key('single', 's1'))
    await held.release()
    await pool.close(key('single', 's1'))
    const next = await pool.acquire(key('single', 's2'))
    await next.release()
  })

  test("an acquire cancelled by the caller's signal rejects with its reason and leaves no container", async ({
    env,
  }) => {
    const pool = env.pool()
    const controller = new AbortController()
    const pending = pool.acquire(key('plain'), { signal: controller.signal })
    setTimeout(() => controller.abort(new Error('caller gave up')), 30)
    await expect(pending).rejects.toThrow('caller gave up')
    await waitFor(
      async () => (await env.containers()).length === 0,
      10_000,
      'the aborted create to be cleaned up',
    )
  })
})
