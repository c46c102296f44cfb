import { describe, expect } from 'vitest'
import { key, poolTest as test, sh } from '../../support/pool-env.js'

describe('session pool: affinity (real Docker, real Redis)', () => {
  for (const store of ['redis', 'memory'] as const) {
    test(`a session reuses its sandbox: files persist across acquires (${store} store)`, async ({ env }) => {
      const pool = env.pool({ store })
      const first = await pool.acquire(key('plain', 's1'))
      expect(first.hit).toBe(false)
      await sh(first, 'echo kept > note.txt')
      await first.release()
      const again = await pool.acquire(key('plain', 's1'))
      expect(again.hit).toBe(true)
      expect(again.ref.id).toBe(first.ref.id)
      expect(await sh(again, 'cat note.txt')).toBe('kept\n')
      await again.release()
      expect(pool.stats()).toMatchObject({ acquires: 2, misses: 1, hits: 1, boundHits: 1, creates: 1 })
      expect(await env.containers()).toHaveLength(1)
    })

    test(`concurrent first acquires of one session create exactly one sandbox (${store} store)`, async ({
      env,
    }) => {
      const pool = env.pool({ store })
      const leases = await Promise.all(Array.from({ length: 8 }, () => pool.acquire(key('plain', 'burst'))))
      expect(new Set(leases.map((l) => l.ref.id)).size).toBe(1)
      expect(pool.stats().creates).toBe(1)
      expect(await env.containers()).toHaveLength(1)
      await Promise.all(leases.map((l) => l.release()))
    })
  }

  test('two pools ("workers") on one Redis share a session’s sandbox, reconnecting by ref', async ({
    env,
  }) => {
    const a = env.pool()
    const b = env.pool({ providers: [env.newDocker()] })
    const la = await a.acquire(key('plain', 'shared'))
    await sh(la, 'echo from-a > f')
    await la.release()
    const lb = await b.acquire(key('plain', 'shared'))
    expect(lb.ref.id).toBe(la.ref.id)
    expect(lb.hit).toBe(true)
    expect(await sh(lb, 'cat f')).toBe('from-a\n')
    await lb.release()
    expect(b.stats().creates).toBe(0)
  })

  test('concurrent first acquires from two pools create exactly one sandbox', async ({ env }) => {
    const a = env.pool()
    const b = env.pool({ providers: [env.newDocker()] })
    const leases = await Promise.all(
      Array.from({ length: 10 }, (_, i) => (i % 2 ? a : b).acquire(key('plain', 'race'))),
    )
    expect(new Set(leases.map((l) => l.ref.id)).size).toBe(1)
    expect(a.stats().creates + b.stats().creates).toBe(1)
    expect(await env.containers()).toHaveLength(1)
    await Promise.all(leases.map((l) => l.release()))
  })

  test('another session or tenant never gets a used sandbox', async ({ env }) => {
    const pool = env.pool()
    const keys = [key('plain', 's1', 'acme'), key('plain', 's2', 'acme'), key('plain', 's1', 'globex')]
    const ids: string[] = []
    for (const k of keys) {
      const l = await pool.acquire(k)
      expect(await sh(l, 'ls')).toBe('')
      await sh(l, `echo ${k.tenant}-${String(k.sessionId)} > owner`)
      ids.push(l.ref.id)
      await l.release()
    }
    expect(new Set(ids).size).toBe(3)
    for (const k of keys) {
      const l = await pool.acquire(k)
      expect(await sh(l, 'cat owner')).toBe(`${k.tenant}-${String(k.sessionId)}\n`)
      await l.release()
    }
  })

  test("release('lost') unbinds and destroys; the next acquire rebinds to a fresh sandbox", async ({
    env,
  }) => {
    const pool = env.pool()
    const l1 = await pool.acquire(key('plain', 's'))
    await sh(l1, 'echo x > f')
    await l1.release('lost')
    expect(await env.exists(l1.ref.id)).toBe(false)
    const l2 = await pool.acquire(key('plain', 's'))
    expect(l2.ref.id).not.toBe(l1.ref.id)
    expect(l2.hit).toBe(false)
    expect(await sh(l2, 'ls')).toBe('')
    await l2.release()
    expect(pool.stats().evictions.lost).toBe(1)
  })

  test('a sandbox killed behind the pool’s back: the next acquire rebinds before anything runs and notes the loss; a stale lost is harmless', async ({
    env,
  }) => {
    const a = env.pool()
    const l1 = await a.acquire(key('plain', 's'))
    await l1.release()
    await env.docker.destroy(l1.ref)
    // A worker with a cached handle finds out at acquire (nothing ran yet) and binds a fresh sandbox.
    const l2 = await a.acquire(key('plain', 's'))
    expect(l2.ref.id).not.toBe(l1.ref.id)
    expect(await sh(l2, 'echo ok')).toBe('ok\n')
    expect(l2.sandboxReplaced).toMatchObject({ filesLost: true, previousSandboxId: l1.ref.id })
    // Killed again while l2 is held: another worker (no cached handle) finds the ref gone on connect.
    await env.docker.destroy(l2.ref)
    const b = env.pool({ providers: [env.newDocker()] })
    const l3 = await b.acquire(key('plain', 's'))
    expect(l3.ref.id).not.toBe(l2.ref.id)
    expect(l3.sandboxReplaced?.previousSandboxId).toBe(l2.ref.id)
    expect(await sh(l3, 'echo ok')).toBe('ok\n')
    // The stale lease's 'lost' no longer touches the new binding.
    await l2.release('lost', 'stale')
    await l3.release()
    const l4 = await a.acquire(key('plain', 's'))
    expect(l4.ref.id).toBe(l3.ref.id)
    expect(l4.sandboxReplaced?.reason).not.toContain('stale')
    await l4.release()
    expect((await a.acknowledge(key('plain', 's')))?.previousSandboxId).toBe(l2.ref.id)
    expect(await a.state(key('plain', 's'))).toEqual({ sandboxId: l3.ref.id })
  })

  test('close(key) destroys the session’s sandbox; the next acquire starts clean', async ({ env }) => {
    const pool = env.pool()
    const l1 = await pool.acquire(key('plain', 's'))
    await sh(l1, 'echo x > f')
    await l1.release()
    await pool.close(key('plain', 's'))
    await pool.close(key('plain', 'never-bound'))
    expect(await env.exists(l1.ref.id)).toBe(false)
    const l2 = await pool.acquire(key('plain', 's'))
    expect(l2.ref.id).not.toBe(l1.ref.id)
    await l2.release()
    expect(pool.stats().evictions.closed).toBe(1)
  })

  test('unknown provider or profile: the registry’s error, listing the known ones', async ({ env }) => {
    const pool = env.pool()
    await expect(pool.acquire({ tenant: 't', providerId: 'nope', profile: 'plain' })).rejects.toMatchObject({
      code: 'UNKNOWN_PROVIDER',
      message: expect.stringContaining('docker'),
    })
    await expect(pool.acquire({ tenant: 't', providerId: 'docker', profile: 'nope' })).rejects.toMatchObject({
      code: 'UNKNOWN_PROFILE',
      message: expect.stringContaining('plain'),
    })
  })
})
