/**
 * Session-pool acquire latency, real Docker engine, Redis store (the fleet) and memory store
 * (embedded): warm-pool claim vs bound-session reuse vs a cold acquire that creates a sandbox.
 *
 *   npx tsx bench/pool-acquire.ts
 *   # BENCH_WARM (default 20, at most 50) warm claims, BENCH_ITERATIONS (default 500, at most 5000)
 *   # bound acquires, BENCH_CREATES (default 10, at most 30) cold creates; REDIS_URL
 */
import { randomUUID } from 'node:crypto'
import { Redis } from 'ioredis'
import { createDockerProvider } from '../providers/docker/index.js'
import { ProviderRegistry } from '../src/sandbox/registry.js'
import {
  createSessionPool,
  MemorySessionStore,
  POOL_LABELS,
  RedisSessionStore,
} from '../src/sessions/index.js'
import type { Lease, SandboxSessionPool, SessionKey, SessionStore } from '../src/sessions/index.js'

const bounded = (name: string, dflt: number, max: number) =>
  Math.min(Math.max(Number(process.env[name] ?? dflt) || dflt, 1), max)
const WARM = bounded('BENCH_WARM', 20, 50)
const ITERATIONS = bounded('BENCH_ITERATIONS', 500, 5000)
const CREATES = bounded('BENCH_CREATES', 10, 30)
const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379'

function percentile(samples: number[], p: number): number {
  const sorted = [...samples].sort((a, b) => a - b)
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? NaN
}

function report(label: string, samples: number[]): number {
  const p50 = percentile(samples, 50)
  const fmt = (n: number) => n.toFixed(2).padStart(8)
  console.log(
    `${label.padEnd(40)} n=${String(samples.length).padStart(4)}  p50 ${fmt(p50)} ms  p99 ${fmt(percentile(samples, 99))} ms`,
  )
  return p50
}

/** Times `n` acquires (the acquire alone); each lease is checked, then released (timed apart). */
async function acquires(
  n: number,
  acquire: (i: number) => Promise<Lease>,
  expectHit: boolean,
  releaseTimes?: number[],
): Promise<number[]> {
  const samples: number[] = []
  for (let i = 0; i < n; i++) {
    const t0 = performance.now()
    const lease = await acquire(i)
    samples.push(performance.now() - t0)
    if (lease.hit !== expectHit) throw new Error(`expected hit=${String(expectHit)}`)
    const t1 = performance.now()
    await lease.release()
    releaseTimes?.push(performance.now() - t1)
  }
  return samples
}

const key = (profile: string, sessionId?: string): SessionKey =>
  sessionId === undefined
    ? { tenant: 'bench', providerId: 'docker', profile }
    : { tenant: 'bench', providerId: 'docker', profile, sessionId }

async function run(kind: 'redis' | 'memory', scope: string, store: SessionStore): Promise<void> {
  const docker = createDockerProvider({ instanceId: scope })
  const registry = new ProviderRegistry().register(docker).addProfiles({
    warm: { provider: 'docker', pool: { minIdle: WARM, maxSize: WARM * 2 + 4 } },
    cold: { provider: 'docker', pool: { minIdle: 0, maxSize: CREATES + 4 } },
  })
  const pool: SandboxSessionPool = createSessionPool({
    providers: registry,
    store,
    scope,
    maxSandboxesPerTenant: WARM * 2 + CREATES + 8,
    refillConcurrency: 4,
    prewarm: [{ providerId: 'docker', profile: 'warm' }],
  })
  console.log(`\n# ${kind} store`)
  try {
    const deadline = Date.now() + 120_000
    while ((pool.stats().current.warm['docker/warm'] ?? 0) < WARM) {
      if (Date.now() > deadline) throw new Error('warm pool did not fill in 120 s')
      await pool.warmSettled()
      await new Promise((r) => setTimeout(r, 20))
    }
    // Warm-up of code paths (not measured): one claim, a few bound acquires.
    await (await pool.acquire(key('warm', 'warmup'))).release()
    for (let i = 0; i < 20; i++) await (await pool.acquire(key('warm', 'warmup'))).release()

    const warm = await acquires(WARM - 1, (i) => pool.acquire(key('warm', `w${i}`)), true)
    const warmP50 = report('warm-pool claim (new session)', warm)

    // Let the refill the claims triggered finish, so the bound loop measures the store alone.
    await pool.warmSettled()
    await (await pool.acquire(key('warm', 'bound'))).release()
    const releases: number[] = []
    const bound = await acquires(ITERATIONS, () => pool.acquire(key('warm', 'bound')), true, releases)
    const boundP50 = report('bound-session acquire (reuse)', bound)
    report('bound-session release', releases)

    const cold = await acquires(CREATES, () => pool.acquire(key('cold')), false)
    const createP50 = report('cold acquire (create, ephemeral)', cold)
    console.log(
      `ratios: warm/create ${(warmP50 / createP50).toFixed(4)}  bound/create ${(boundP50 / createP50).toFixed(5)}`,
    )
    const s = pool.stats()
    console.log(
      `stats: acquires ${s.acquires}, hits ${s.hits} (warm ${s.warmHits}, bound ${s.boundHits}), misses ${s.misses}, ` +
        `creates ${s.creates} (mean ${(s.createLatency.sumMs / s.createLatency.count).toFixed(0)} ms)`,
    )
  } finally {
    await pool.shutdown({ destroyIdle: true })
    for (const c of await docker.docker.listContainers({
      all: true,
      filters: { label: [`${POOL_LABELS.scope}=${scope}`] },
    })) {
      await docker.destroy({ providerId: 'docker', id: c.Id, profile: '' })
    }
    await docker.close()
  }
}

const id = randomUUID().slice(0, 8)
const prefix = `bench-pool-${id}:`
const redis = new Redis(REDIS_URL)
try {
  const store = new RedisSessionStore({ redis, prefix })
  await run('redis', `bench-r-${id}`, store)
  await run('memory', `bench-m-${id}`, new MemorySessionStore())
} finally {
  const keys = await redis.keys(`${prefix}*`)
  if (keys.length > 0) await redis.del(...keys)
  await redis.quit()
}
