/**
 * The queue alone, without sandboxes or HTTP: each Redis driver (`bullmq`, `redis`) on the Redis of
 * REDIS_URL, one consumer (concurrency = `--loops`) in this process running a processor that passes
 * the fence and returns at once, and `--loops` client loops each submitting a job and waiting for its
 * result, back to back, for `--seconds` per phase; phases alternate between the drivers for
 * `--rounds` rounds. Prints jobs/s and p50/p99 of submit + wait per phase: what the job lifecycle
 * costs on its own, the ceiling it puts on a fleet's routed commands.
 *
 *   npx tsx bench/queue-drivers.ts                          # needs Redis (REDIS_URL)
 *   npx tsx bench/queue-drivers.ts --loops 24 --seconds 5 --rounds 3
 */
import { randomUUID } from 'node:crypto'
import { parseArgs } from 'node:util'
import { createJobQueue, deriveJobId } from '../src/queue/index.js'
import type { ExecJob, JobProcessor, JobQueue } from '../src/queue/index.js'
import { deleteKeys, REDIS_URL } from '../test/support/redis.js'
import { percentile } from './lib/percentile.js'

const { values: flags } = parseArgs({
  options: {
    loops: { type: 'string', default: '24' },
    seconds: { type: 'string', default: '5' },
    rounds: { type: 'string', default: '3' },
  },
})
const loops = Math.max(1, Number(flags.loops) || 24)
const seconds = Math.max(1, Number(flags.seconds) || 5)
const rounds = Math.max(1, Number(flags.rounds) || 3)

const processor: JobProcessor = async (job, ctx) => {
  const early = await ctx.fence.begin({ sandboxId: 'sb' })
  if (early.kind !== 'run') throw new Error(`fence: ${early.kind}`)
  ctx.publish({ stream: 'stdout', data: 'hi\n' })
  return {
    status: 'completed',
    attempt: ctx.attempt,
    workerId: ctx.workerId,
    result: {
      exitCode: 0,
      stdout: job.command,
      stderr: '',
      timedOut: false,
      truncated: false,
      durationMs: 0,
      sandboxId: 'sb',
    },
  }
}

const jobOf = (): ExecJob => {
  const callId = randomUUID()
  return {
    jobId: deriveJobId('bench', callId),
    tenant: 'bench',
    sessionId: 's',
    providerId: 'docker',
    profile: 'default',
    command: 'echo hi',
    timeoutMs: 10_000,
    outputCapBytes: 1 << 20,
    idempotent: false,
    callId,
    toolName: 'bash',
    submittedAt: Date.now(),
  }
}

async function phase(queue: JobQueue, ms: number): Promise<{ perS: number; p50: number; p99: number }> {
  const end = Date.now() + ms
  const latencies: number[] = []
  const start = performance.now()
  await Promise.all(
    Array.from({ length: loops }, async () => {
      while (Date.now() < end) {
        const t = performance.now()
        const job = jobOf()
        await queue.submit(job)
        const r = await queue.wait(job.jobId, { timeoutMs: 30_000 })
        if (r.status !== 'completed') throw new Error(`job ${r.status}`)
        latencies.push(performance.now() - t)
      }
    }),
  )
  const elapsedS = (performance.now() - start) / 1000
  return { perS: latencies.length / elapsedS, p50: percentile(latencies, 50), p99: percentile(latencies, 99) }
}

const drivers = ['bullmq', 'redis'] as const
const prefixes = drivers.map((d) => `bqd-${d}-${randomUUID().slice(0, 6)}`)
const queues: JobQueue[] = []
try {
  for (const [i, driver] of drivers.entries()) {
    const queue = await createJobQueue({
      driver,
      redisUrl: REDIS_URL,
      prefix: prefixes[i],
      queueName: 'exec',
    })
    queues.push(queue)
    await queue.consume(processor, { concurrency: loops, workerId: `bench-${driver}` })
    await phase(queue, 1_000) // warm: scripts loaded, connections up
  }
  for (let r = 1; r <= rounds; r++) {
    for (const [i, driver] of drivers.entries()) {
      const f = await phase(queues[i] as JobQueue, seconds * 1000)
      console.log(
        `round ${r}  ${driver.padEnd(7)} ${f.perS.toFixed(0).padStart(5)} jobs/s  p50 ${f.p50.toFixed(2)} ms  p99 ${f.p99.toFixed(2)} ms`,
      )
    }
  }
} finally {
  for (const q of queues) await q.close()
  for (const p of prefixes) await deleteKeys(`${p}:*`)
}
