import { describe, expect } from 'vitest'
import { resolveProfile } from '../../../src/sandbox/profiles.js'
import type { Labels } from '../../../src/sandbox/types.js'
import { POOL_LABELS, scopeLabels } from '../../../src/sessions/index.js'
import type { PoolEnv } from '../../support/pool-env.js'
import { key, poolTest as test, waitFor } from '../../support/pool-env.js'

const PLAIN = resolveProfile('plain', { provider: 'docker' })

/** A labelled container of the test's scope that the pool knows nothing about. */
async function orphan(env: PoolEnv, createdAt?: number): Promise<string> {
  const labels: Labels = { ...scopeLabels(env.scope) }
  if (createdAt !== undefined) labels[POOL_LABELS.createdAt] = String(createdAt)
  const sandbox = await env.docker.create(PLAIN, { labels })
  await sandbox.close()
  return sandbox.ref.id
}

describe('session pool: reaper (real Docker, real Redis)', () => {
  test('reap() destroys orphans and spares bound, warm, leased and just-created sandboxes — from any worker', async ({
    env,
  }) => {
    const a = env.pool({ prewarm: [{ providerId: 'docker', profile: 'warm-ttl' }] })
    const bound = await a.acquire(key('plain', 's1'))
    await bound.release()
    const leased = await a.acquire(key('plain')) // ephemeral: no binding, only a lease
    await waitFor(
      async () => {
        await a.warmSettled()
        return (a.stats().current.warm['docker/warm-ttl'] ?? 0) === 1
      },
      20_000,
      'one warm sandbox',
    )
    const old = await orphan(env, Date.now() - 10 * 60_000)
    const young = await orphan(env, Date.now())
    const spared = new Set(await env.containers())
    spared.delete(old)
    expect(spared.size).toBe(4) // bound, leased, warm, young
    // Another worker, with no local state about these sandboxes, reaps from the shared store.
    const b = env.pool({ providers: [env.newDocker()] })
    expect(await b.reap()).toBe(1)
    expect(await env.exists(old)).toBe(false)
    expect(new Set(await env.containers())).toEqual(spared)
    expect(b.stats().reaped).toBe(1)
    expect(await a.reap()).toBe(0)
    await leased.release()
    expect(await env.exists(young)).toBe(true)
  })

  test('a sandbox listed without its creation label is reaped once seen unused past the grace period', async ({
    env,
  }) => {
    const pool = env.pool({ reapGraceMs: 200 })
    const id = await orphan(env)
    expect(await pool.reap()).toBe(0) // first sighting starts its grace period
    await waitFor(async () => (await pool.reap()) === 1, 5_000, 'the grace period to pass')
    expect(await env.exists(id)).toBe(false)
  })

  test('a crashed worker’s ephemeral sandbox is reaped once its lease lapses (no heartbeat)', async ({
    env,
  }) => {
    const crashed = env.pool({ leaseTtlMs: 300 })
    const lease = await crashed.acquire(key('plain'))
    // The worker dies: its heartbeat stops, the lease is never released.
    await crashed.shutdown()
    const survivor = env.pool({ providers: [env.newDocker()], reapGraceMs: 0 })
    expect(await env.exists(lease.ref.id)).toBe(true)
    await waitFor(async () => (await survivor.reap()) === 1, 5_000, 'the dead lease to lapse')
    expect(await env.exists(lease.ref.id)).toBe(false)
  })

  test('live leases are renewed by the heartbeat, so a long call is never reaped', async ({ env }) => {
    const pool = env.pool({ leaseTtlMs: 300, reapGraceMs: 0 })
    const lease = await pool.acquire(key('plain'))
    const t0 = Date.now()
    // Several lease periods pass while the call runs; no event marks them, so poll with a deadline.
    await waitFor(
      async () => {
        expect(await pool.reap()).toBe(0)
        return Date.now() - t0 > 1_200
      },
      5_000,
      'four lease periods',
    )
    expect(await env.exists(lease.ref.id)).toBe(true)
    await lease.release()
  })

  test('the periodic reaper (reapIntervalMs) runs on its own', async ({ env }) => {
    // Created before the pool: its label claims an old age, so a reaper running during the
    // create would (rightly) take it for an orphan.
    const id = await orphan(env, Date.now() - 10 * 60_000)
    const pool = env.pool({ reapIntervalMs: 50 })
    await waitFor(async () => !(await env.exists(id)), 5_000, 'the periodic reaper')
    expect(pool.stats().reaped).toBe(1)
  })
})
