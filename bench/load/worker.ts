/*
 * One fleet worker of bench/load.ts, in its own process (spawned with tsx). It wires what
 * `sbx worker` wires: Docker provider, registry, Redis session store, session pool, BullMQ queue and
 * the exec worker. It reports on stdout, one JSON object per line (see WorkerLine in ./fleet.ts):
 *   {"event":"ready"}  {"event":"start","jobId","attempt"}  {"event":"end","jobId","attempt","status","pool"}
 *   {"event":"closed","pool"}
 * `pool` carries this process's pool counters (acquires, hits, misses, creates), so the bench still
 * knows a SIGKILLed worker's last figures. SIGTERM closes it gracefully (drain deadline SBX_DRAIN_MS).
 * SIGUSR1 arms a crash: SBX_KILL_DELAY_MS after the next job starts here (by then it is past the
 * fence and in its command, as seen from this process's own clock), the worker prints
 * {"event":"dying","wall":<Date.now()>} and SIGKILLs itself — no cleanup, as a crashed machine.
 */
import { createDockerProvider } from '../../providers/docker/index.js'
import { createBullmqJobQueue } from '../../src/queue/index.js'
import { ProviderRegistry } from '../../src/sandbox/registry.js'
import { createSessionPool, RedisSessionStore } from '../../src/sessions/index.js'
import type { SandboxSessionPool } from '../../src/sessions/index.js'
import { startExecWorker } from '../../src/worker/index.js'
import { LOAD_PROFILE, loadProfiles } from './profile.js'

const env = (name: string): string => {
  const v = process.env[name]
  if (!v) throw new Error(`bench/load/worker: ${name} is not set`)
  return v
}

const say = (o: Record<string, unknown>): void => {
  process.stdout.write(JSON.stringify(o) + '\n')
}

const redisUrl = env('REDIS_URL')
const scope = env('SBX_SCOPE')
const workerId = env('SBX_WORKER_ID')
const sessions = Number(env('SBX_SESSIONS'))
const docker = createDockerProvider({ instanceId: scope })
const registry = new ProviderRegistry().register(docker).addProfiles(loadProfiles(sessions))
const store = new RedisSessionStore({ redis: redisUrl, prefix: env('SBX_SESSION_PREFIX') })
const pool: SandboxSessionPool = createSessionPool({
  providers: registry,
  store,
  scope,
  instanceId: workerId,
  maxSandboxesPerTenant: Math.max(64, sessions * 2),
  maintenanceIntervalMs: 0,
  reapIntervalMs: 0,
})
const poolFigures = (): Record<string, number> => {
  const s = pool.stats()
  return { acquires: s.acquires, hits: s.hits, misses: s.misses, creates: s.creates }
}
const queue = await createBullmqJobQueue({ redisUrl, prefix: env('SBX_QUEUE_PREFIX'), queueName: 'exec' })
const killDelayMs = Number(process.env.SBX_KILL_DELAY_MS ?? '5')
let armed = false
process.on('SIGUSR1', () => {
  armed = true
})
const die = (): void => {
  say({ event: 'dying', wall: Date.now() })
  process.kill(process.pid, 'SIGKILL')
}
const worker = await startExecWorker({
  queue,
  pool,
  workerId,
  concurrency: Number(process.env.SBX_CONCURRENCY ?? '8'),
  onJob: (e) => {
    if (e.type === 'start') {
      say({ event: 'start', jobId: e.job.jobId, attempt: e.attempt })
      if (armed) {
        armed = false
        setTimeout(die, killDelayMs)
      }
    } else
      say({
        event: 'end',
        jobId: e.job.jobId,
        attempt: e.attempt,
        status: e.result?.status ?? 'error',
        pool: poolFigures(),
      })
  },
})
say({ event: 'ready', profile: LOAD_PROFILE })

process.once('SIGTERM', () => {
  void (async () => {
    await worker.close({ deadlineMs: Number(process.env.SBX_DRAIN_MS ?? '5000') })
    await queue.close()
    await pool.shutdown()
    await store.close()
    await docker.close()
    say({ event: 'closed', pool: poolFigures() })
    process.exit(0)
  })()
})
