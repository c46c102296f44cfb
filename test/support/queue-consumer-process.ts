/*
 * A bare queue consumer in its own process (no sandbox): the scripted processor (scripted-processor.ts)
 * behind a consumer of SBX_QUEUE_DRIVER (`bullmq` or `redis`) on the Redis of REDIS_URL, prefix
 * SBX_QUEUE_PREFIX, queue `exec`; lease tuning from SBX_LOCK_MS / SBX_STALLED_MS. For tests that kill
 * a consumer mid-job (SIGKILL: no close, no hand-back) and check what the rest of the fleet does.
 * Reports on stdout like worker-process.ts: {"event":"ready"}, {"event":"start","jobId","attempt"}.
 */
import { createJobQueue } from '../../src/queue/index.js'
import { ScriptedProcessor } from './scripted-processor.js'

const env = (name: string): string => {
  const v = process.env[name]
  if (!v) throw new Error(`queue-consumer-process: ${name} is not set`)
  return v
}
const say = (o: Record<string, unknown>): void => {
  process.stdout.write(JSON.stringify(o) + '\n')
}

const driver = env('SBX_QUEUE_DRIVER')
if (driver !== 'bullmq' && driver !== 'redis') throw new Error(`queue-consumer-process: driver ${driver}`)
const workerId = env('SBX_WORKER_ID')
const queue = await createJobQueue({
  driver,
  redisUrl: env('REDIS_URL'),
  prefix: env('SBX_QUEUE_PREFIX'),
  queueName: 'exec',
  lockDurationMs: Number(process.env.SBX_LOCK_MS ?? '4000'),
  stalledIntervalMs: Number(process.env.SBX_STALLED_MS ?? '1500'),
})
const p = new ScriptedProcessor()
p.events.on('started', (jobId: string) => say({ event: 'start', jobId }))
await queue.consume(p.process, { workerId, concurrency: 2 })
say({ event: 'ready', workerId, pid: process.pid })
process.once('SIGTERM', () => {
  void queue.close().then(() => process.exit(0))
})
