/*
 * A fleet exec worker in its own process, for the two-process and Redis fault tests (spawned with
 * tsx). It wires what `sbx worker` wires — Docker provider, Redis session store, session pool, queue
 * (SBX_QUEUE_DRIVER `bullmq`, the default, or `redis`), exec worker — on the Redis of REDIS_URL. It reports on stdout, one JSON object per line:
 *   {"event":"ready"}  {"event":"start","jobId","attempt"}  {"event":"end","jobId","attempt","status"}
 *   {"event":"error","context","message"}  {"event":"closed"}
 * SIGTERM closes it gracefully (drain deadline SBX_DRAIN_MS).
 */
import { createDockerProvider } from '../../providers/docker/index.js'
import { Redis } from 'ioredis'
import { reconnectDelayMs } from '../../src/redis/index.js'
import { createJobQueue } from '../../src/queue/index.js'
import { ProviderRegistry } from '../../src/sandbox/registry.js'
import { createSessionPool, RedisSessionStore } from '../../src/sessions/index.js'
import { startExecWorker } from '../../src/worker/index.js'
import { PROFILES } from './queue-world.js'

const env = (name: string): string => {
  const v = process.env[name]
  if (!v) throw new Error(`worker-process: ${name} is not set`)
  return v
}

const say = (o: Record<string, unknown>): void => {
  process.stdout.write(JSON.stringify(o) + '\n')
}

const message = (err: unknown): string => (err instanceof Error ? err.message : String(err))

const redisUrl = env('REDIS_URL')
const scope = env('SBX_SCOPE')
const workerId = env('SBX_WORKER_ID')
const docker = createDockerProvider({ instanceId: scope })
const registry = new ProviderRegistry().register(docker).addProfiles(PROFILES)
// The session store's client as `sbx worker` builds it (createRuntime): bounded retries per command,
// the service's reconnect schedule.
const storeClient = new Redis(redisUrl, { maxRetriesPerRequest: 1, retryStrategy: reconnectDelayMs })
storeClient.on('error', () => undefined)
const store = new RedisSessionStore({ redis: storeClient, prefix: env('SBX_SESSION_PREFIX') })
const pool = createSessionPool({
  providers: registry,
  store,
  scope,
  maintenanceIntervalMs: 0,
  reapIntervalMs: 0,
  onError: (err, context) => say({ event: 'error', context, message: message(err) }),
})
const driver = process.env.SBX_QUEUE_DRIVER === 'redis' ? 'redis' : 'bullmq'
const queue = await createJobQueue({ driver, redisUrl, prefix: env('SBX_QUEUE_PREFIX'), queueName: 'exec' })
const worker = await startExecWorker({
  queue,
  pool,
  workerId,
  concurrency: Number(process.env.SBX_CONCURRENCY ?? '4'),
  onError: (err, context) => say({ event: 'error', context, message: message(err) }),
  onJob: (e) => {
    if (e.type === 'start') say({ event: 'start', jobId: e.job.jobId, attempt: e.attempt })
    else
      say({
        event: 'end',
        jobId: e.job.jobId,
        attempt: e.attempt,
        status: e.result?.status ?? 'threw',
        ...(e.error === undefined ? {} : { message: message(e.error) }),
      })
  },
})
say({ event: 'ready', workerId, pid: process.pid })

process.once('SIGTERM', () => {
  void (async () => {
    await worker.close({ deadlineMs: Number(process.env.SBX_DRAIN_MS ?? '5000') })
    await queue.close()
    await pool.shutdown()
    await store.close()
    await storeClient.quit()
    await docker.close()
    say({ event: 'closed' })
    process.exit(0)
  })()
})
