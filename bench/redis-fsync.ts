/**
 * What Redis's `appendfsync always` (docker-compose.yml ships it) costs against `everysec`, measured
 * through the HTTP API as users run it: a redis-server of its own (AOF on), `sbx api` and two
 * `sbx worker` child processes, and `--concurrency` clients in this process each POSTing
 * `/v1/exec` (wait for the result) of `true` in a session of its own, for `--seconds` per phase.
 * Phases alternate always → everysec → always → everysec (`CONFIG SET appendfsync`, same processes),
 * so drift in the machine's load shows up as a difference between phases of one setting.
 *
 *   npx tsx bench/redis-fsync.ts                       # needs the Docker engine and redis-server
 *   npx tsx bench/redis-fsync.ts --seconds 30 --concurrency 16
 */
import { parseArgs } from 'node:util'
import { RedisServer, redisCommand } from '../test/support/redis-server.js'
import {
  fleetConfig,
  removeScopeContainers,
  startSbxServer,
  startSbxWorker,
  uniqueName,
} from '../test/support/sbx-cli.js'
import { percentile } from './lib/percentile.js'

const { values: flags } = parseArgs({
  options: {
    seconds: { type: 'string', default: '20' },
    concurrency: { type: 'string', default: '8' },
    rounds: { type: 'string', default: '2' },
  },
})
const seconds = Number(flags.seconds)
const concurrency = Number(flags.concurrency)
const rounds = Number(flags.rounds)

const redis = await RedisServer.start()
const prefix = uniqueName('fsync')
const config = fleetConfig(prefix, {
  queue: { driver: 'bullmq', redisUrl: redis.url, prefix },
  quotas: { requestsPerSecond: 100_000, maxConcurrentJobs: 1_000, maxSandboxes: 64 },
} as never)
const api = await startSbxServer('api', { config })
const workers = [await startSbxWorker({ config }), await startSbxWorker({ config })]

async function phase(
  fsync: 'always' | 'everysec',
): Promise<{ rps: number; p50: number; p99: number; errors: number }> {
  const reply = await redisCommand(redis.port, `CONFIG SET appendfsync ${fsync}`)
  if (!reply.startsWith('+OK')) throw new Error(`CONFIG SET appendfsync ${fsync}: ${reply}`)
  const latencies: number[] = []
  let errors = 0
  const end = performance.now() + seconds * 1000
  await Promise.all(
    Array.from({ length: concurrency }, async (_, i) => {
      while (performance.now() < end) {
        const t0 = performance.now()
        const res = await api.post('/v1/exec', {
          provider: 'docker',
          profile: 'default',
          sessionId: `fs-${i}`,
          command: 'true',
        })
        const job = (await res.json()) as { state?: string }
        if (res.status === 200 && job.state === 'completed') latencies.push(performance.now() - t0)
        else errors++
      }
    }),
  )
  return {
    rps: latencies.length / seconds,
    p50: percentile(latencies, 50),
    p99: percentile(latencies, 99),
    errors,
  }
}

try {
  // Warm-up: every session's sandbox is created before anything is timed.
  await Promise.all(
    Array.from({ length: concurrency }, (_, i) =>
      api.post('/v1/exec', { provider: 'docker', profile: 'default', sessionId: `fs-${i}`, command: 'true' }),
    ),
  )
  console.log(
    `# ${concurrency} clients, ${seconds} s per phase, sbx api + 2 sbx worker, Redis AOF on (own redis-server)`,
  )
  console.log('| appendfsync | round | completed/s | p50 ms | p99 ms | errors |')
  console.log('|---|---:|---:|---:|---:|---:|')
  for (let r = 1; r <= rounds; r++)
    for (const fsync of ['always', 'everysec'] as const) {
      const x = await phase(fsync)
      console.log(
        `| ${fsync} | ${r} | ${x.rps.toFixed(1)} | ${x.p50.toFixed(1)} | ${x.p99.toFixed(1)} | ${x.errors} |`,
      )
    }
} finally {
  for (let i = 0; i < concurrency; i++)
    await api.fetch(`/v1/sessions/fs-${i}`, { method: 'DELETE' }).catch(() => undefined)
  for (const w of workers) await w.stop()
  await api.stop()
  await redis.destroy()
  await removeScopeContainers(prefix)
}
