/**
 * A separate worker process for the cross-process pool tests. Env: REDIS_URL, POOL_PREFIX,
 * POOL_SCOPE, SESSION_ID (absent: ephemeral), LEASE_TTL_MS. Prints `ready`, waits for `go` on
 * stdin, acquires, prints `lease <id> <hit>`, then on `release` releases and exits; killed with
 * SIGKILL it simply dies holding the lease.
 */
import { createInterface } from 'node:readline'
import { createDockerProvider } from '../../providers/docker/index.js'
import { ProviderRegistry } from '../../src/sandbox/registry.js'
import { createSessionPool, RedisSessionStore } from '../../src/sessions/index.js'

const env = (name: string): string => {
  const v = process.env[name]
  if (v === undefined) throw new Error(`${name} is required`)
  return v
}

const docker = createDockerProvider()
const registry = new ProviderRegistry()
  .register(docker)
  .addProfiles({ plain: { provider: 'docker', pool: { minIdle: 0, maxSize: 8 } } })
const store = new RedisSessionStore({ redis: env('REDIS_URL'), prefix: env('POOL_PREFIX') })
const pool = createSessionPool({
  providers: registry,
  store,
  scope: env('POOL_SCOPE'),
  leaseTtlMs: Number(process.env.LEASE_TTL_MS ?? 30_000),
  maintenanceIntervalMs: 0,
  reapIntervalMs: 0,
})
const sessionId = process.env.SESSION_ID
const key = { tenant: 'acme', providerId: 'docker', profile: 'plain', ...(sessionId ? { sessionId } : {}) }

const lines = createInterface({ input: process.stdin })
let lease: Awaited<ReturnType<typeof pool.acquire>> | undefined
console.log('ready')
for await (const line of lines) {
  if (line === 'go') {
    lease = await pool.acquire(key)
    console.log(`lease ${lease.ref.id} ${String(lease.hit)}`)
  } else if (line === 'release') {
    await lease?.release()
    break
  }
}
lines.close()
await pool.shutdown()
await store.close()
await docker.close()
