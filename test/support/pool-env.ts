import { randomUUID } from 'node:crypto'
import { Redis } from 'ioredis'
import { expect, test } from 'vitest'
import { createDockerProvider } from '../../providers/docker/index.js'
import type { DockerProvider } from '../../providers/docker/index.js'
import type { ProfileInput } from '../../src/sandbox/profiles.js'
import { ProviderRegistry } from '../../src/sandbox/registry.js'
import type { SandboxProvider } from '../../src/sandbox/types.js'
import {
  createSessionPool,
  MemorySessionStore,
  POOL_LABELS,
  RedisSessionStore,
} from '../../src/sessions/index.js'
import type {
  CreateSessionPoolOptions,
  Lease,
  SandboxSessionPool,
  SessionKey,
  SessionStore,
} from '../../src/sessions/index.js'
import { deleteKeys } from './redis.js'

/** Profiles every pool test can use (each test gets its own registry, scope and key prefix). */
export const PROFILES: Record<string, ProfileInput> = {
  plain: { provider: 'docker', pool: { minIdle: 0, maxSize: 8 } },
  warm: { provider: 'docker', pool: { minIdle: 4, maxSize: 10 } },
  'warm-8': { provider: 'docker', pool: { minIdle: 8, maxSize: 16 } },
  idle: { provider: 'docker', idleTtlMs: 300, pool: { minIdle: 0, maxSize: 8 } },
  'warm-ttl': { provider: 'docker', idleTtlMs: 800, pool: { minIdle: 1, maxSize: 8 } },
  single: { provider: 'docker', pool: { minIdle: 0, maxSize: 1 } },
  'no-image': {
    provider: 'docker',
    image: 'sandbox-router/does-not-exist:latest',
    pool: { minIdle: 0, maxSize: 4 },
  },
}

/** Options of {@link PoolEnv.pool}: pool options, a store kind, and extra providers. */
export type EnvPoolOptions = Partial<Omit<CreateSessionPoolOptions, 'store' | 'providers'>> & {
  /** `redis` (default, one shared prefix per test), `memory`, or a store instance. */
  store?: 'redis' | 'memory' | SessionStore
  /** A separate Docker provider instance (a second "worker"), or wrapped providers. */
  providers?: SandboxProvider[]
}

/** One test's world: its scope label, Redis prefix, Docker provider and the pools it made. */
export interface PoolEnv {
  readonly scope: string
  readonly prefix: string
  readonly redis: Redis
  readonly docker: DockerProvider
  readonly errors: unknown[]
  /** A pool on this test's scope and prefix (shut down and cleaned up after the test). */
  pool(opts?: EnvPoolOptions): SandboxSessionPool
  /** A new Docker provider (another "worker" reaching the same engine), closed after the test. */
  newDocker(): DockerProvider
  /** Ids of this test's containers that exist now (running or not). */
  containers(): Promise<string[]>
  /** Whether a container exists. */
  exists(id: string): Promise<boolean>
}

/** A session key on the given profile. */
export function key(profile: string, sessionId?: string, tenant = 'acme'): SessionKey {
  return sessionId === undefined
    ? { tenant, providerId: 'docker', profile }
    : { tenant, providerId: 'docker', profile, sessionId }
}

/** Polls `check` until it returns true, or fails after `timeoutMs` (no event exists for these). */
export async function waitFor(
  check: () => Promise<boolean>,
  timeoutMs = 10_000,
  what = 'condition',
): Promise<void> {
  const deadline = Date.now() + timeoutMs
  for (let delay = 10; ; delay = Math.min(delay * 2, 200)) {
    if (await check()) return
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`)
    await new Promise((r) => setTimeout(r, delay))
  }
}

const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379'

/** `test` with an `env` fixture: a fresh scope/prefix, cleaned up afterwards (zero containers left). */
export const poolTest = test.extend<{ env: PoolEnv }>({
  env: async ({}, use) => {
    const id = randomUUID().slice(0, 8)
    const scope = `t-${id}`
    const prefix = `test-pool-${id}:`
    const redis = new Redis(REDIS_URL)
    const dockers: DockerProvider[] = []
    const pools: SandboxSessionPool[] = []
    const stores: SessionStore[] = []
    const errors: unknown[] = []
    const newDocker = () => {
      const d = createDockerProvider({ instanceId: scope })
      dockers.push(d)
      return d
    }
    const docker = newDocker()
    const containers = async () =>
      (
        await docker.docker.listContainers({
          all: true,
          filters: { label: [`${POOL_LABELS.scope}=${scope}`] },
        })
      ).map((c) => c.Id)
    const env: PoolEnv = {
      scope,
      prefix,
      redis,
      docker,
      errors,
      newDocker,
      containers,
      exists: async (cid) =>
        docker.docker
          .getContainer(cid)
          .inspect()
          .then(
            () => true,
            () => false,
          ),
      pool(opts = {}) {
        const { store: kind = 'redis', providers: extra, ...rest } = opts
        const registry = new ProviderRegistry().register(extra?.[0] ?? docker).addProfiles(PROFILES)
        let store: SessionStore
        if (kind === 'memory') store = new MemorySessionStore()
        else if (kind === 'redis') store = new RedisSessionStore({ redis: REDIS_URL, prefix })
        else store = kind
        if (typeof kind === 'string') stores.push(store)
        const pool = createSessionPool({
          providers: registry,
          store,
          scope,
          maintenanceIntervalMs: 0,
          reapIntervalMs: 0,
          onError: (err) => errors.push(err),
          ...rest,
        })
        pools.push(pool)
        return pool
      },
    }
    try {
      await use(env)
    } finally {
      await Promise.all(pools.map((p) => p.shutdown({ destroyIdle: true })))
      for (const cid of await containers())
        await docker.destroy({ providerId: 'docker', id: cid, profile: '' })
      expect(await containers()).toEqual([])
      await Promise.all(dockers.map((d) => d.close()))
      // Stores made here own their connection (created from the URL): close() quits it.
      await Promise.all(stores.map((s) => s.close()))
      await deleteKeys(`${prefix}*`, redis)
      await redis.quit()
    }
  },
})

/** Runs a command in a leased sandbox and returns its stdout (fails on a non-zero exit). */
export async function sh(lease: Pick<Lease, 'sandbox'>, command: string): Promise<string> {
  const r = await lease.sandbox.exec({ command, timeoutMs: 10_000, outputCapBytes: 65_536 })
  if (r.exitCode !== 0) throw new Error(`'${command}' exited ${String(r.exitCode)}: ${r.stderr}`)
  return r.stdout
}
