/**
 * Warm routed command (`echo hi` in a bound session) through the in-process queue and through BullMQ,
 * against a plain dockerode `exec` per command (create + start + read to end + inspect) on the same
 * image; then throughput with 1, 8 and 32 concurrent sessions and the pool hit rate. One process,
 * bounded: BENCH_ITERATIONS (default 300, at most 2000) latency samples per path.
 *
 *   npx tsx bench/routed-exec.ts            # needs the Docker engine and Redis (REDIS_URL)
 */
import type { Duplex } from 'node:stream'
import { createDockerProvider } from '../providers/docker/index.js'
import type { DockerProvider } from '../providers/docker/index.js'
import { resolveProfile } from '../src/sandbox/profiles.js'
import { createRoutedPath } from './lib/routed-path.js'
import type { RoutedPath } from './lib/routed-path.js'
import { percentile } from './lib/percentile.js'

const iterations = Math.min(Math.max(Number(process.env.BENCH_ITERATIONS ?? 300) || 300, 20), 2000)
const warmup = 20
const SESSION_COUNTS = [1, 8, 32] as const
/** Commands per throughput phase, spread over its sessions. */
const PHASE_COMMANDS = 640

interface Stat {
  p50: number
  p99: number
}

function report(label: string, samples: number[]): Stat {
  const stat = { p50: percentile(samples, 50), p99: percentile(samples, 99) }
  console.log(
    `${label.padEnd(52)} n=${String(samples.length).padStart(4)}  p50 ${stat.p50.toFixed(2).padStart(7)} ms  p99 ${stat.p99.toFixed(2).padStart(7)} ms`,
  )
  return stat
}

/**
 * Times each path `n` times, round robin (path A, B, C, A, B, C, ...), so a noisy neighbour on this
 * shared machine slows every path alike instead of whichever happened to run at the time.
 */
async function measureSideBySide(
  n: number,
  paths: Record<string, () => Promise<void>>,
): Promise<Record<string, Stat>> {
  const entries = Object.entries(paths)
  for (let i = 0; i < warmup; i++) for (const [, fn] of entries) await fn()
  const samples = new Map<string, number[]>(entries.map(([label]) => [label, []]))
  for (let i = 0; i < n; i++) {
    for (const [label, fn] of entries) {
      const t = performance.now()
      await fn()
      samples.get(label)?.push(performance.now() - t)
    }
  }
  return Object.fromEntries(entries.map(([label]) => [label, report(label, samples.get(label) ?? [])]))
}

/** One routed path into the Docker provider (see ./lib/routed-path.ts). */
const routedPath = (docker: DockerProvider, queue: 'in-process' | 'bullmq', store: 'memory' | 'redis') =>
  createRoutedPath({
    providers: [docker],
    profile: { provider: 'docker', pool: { minIdle: 0, maxSize: 64 } },
    queue,
    store,
  })

type Path = RoutedPath

/** Commands/s with `sessions` concurrent sessions (each bound first), and the hit rate of the phase. */
async function throughput(label: string, path: Path, sessions: number): Promise<void> {
  const ids = Array.from({ length: sessions }, (_, i) => `tp-${sessions}-${i}`)
  const before = path.pool.stats()
  await Promise.all(ids.map((s) => path.run(s))) // binds each session (creates: misses)
  const perSession = Math.max(1, Math.floor(PHASE_COMMANDS / sessions))
  const t = performance.now()
  await Promise.all(
    ids.map(async (s) => {
      for (let i = 0; i < perSession; i++) await path.run(s)
    }),
  )
  const seconds = (performance.now() - t) / 1000
  const after = path.pool.stats()
  const hits = after.hits - before.hits
  const misses = after.misses - before.misses
  console.log(
    `${label.padEnd(24)} sessions=${String(sessions).padStart(2)}  ${((sessions * perSession) / seconds).toFixed(0).padStart(6)} commands/s` +
      `  pool hit rate ${((100 * hits) / (hits + misses)).toFixed(1)}% (${hits} hits, ${misses} misses incl. ${sessions} binds)`,
  )
}

const docker = createDockerProvider()
const baselineBox = await docker.create(resolveProfile('bench', { provider: 'docker' }), {
  labels: { 'sandbox-router.bench': 'routed-exec' },
})
const paths: Path[] = []
try {
  const container = docker.docker.getContainer(baselineBox.ref.id)
  const baselineExec = async (): Promise<void> => {
    const exec = await container.exec({
      Cmd: ['bash', '-c', 'echo hi'],
      AttachStdout: true,
      AttachStderr: true,
      User: '1000:1000',
    })
    const stream: Duplex = await exec.start({ hijack: true, stdin: false, Detach: false, Tty: false })
    await new Promise<void>((resolve, reject) => {
      stream.on('data', () => undefined)
      stream.on('end', resolve)
      stream.on('error', reject)
    })
    if ((await exec.inspect()).ExitCode !== 0) throw new Error('baseline exec failed')
  }

  const inProc = await routedPath(docker, 'in-process', 'memory')
  paths.push(inProc)
  const bullRedis = await routedPath(docker, 'bullmq', 'redis')
  paths.push(bullRedis)
  const bullMem = await routedPath(docker, 'bullmq', 'memory')
  paths.push(bullMem)

  const { baseline } = await measureSideBySide(Math.min(iterations, 100), { baseline: baselineExec })
  const live = { onStdout: () => undefined }
  const stats = await measureSideBySide(iterations, {
    'routed, in-process queue + memory store': () => inProc.run('warm'),
    'routed, BullMQ + Redis session store (fleet)': () => bullRedis.run('warm'),
    'routed, BullMQ + memory store (queue only)': () => bullMem.run('warm'),
    'routed, BullMQ + Redis store, live output on': () => bullRedis.run('warm', live),
  })
  const ip = stats['routed, in-process queue + memory store']
  const bq = stats['routed, BullMQ + Redis session store (fleet)']
  const bm = stats['routed, BullMQ + memory store (queue only)']
  if (!baseline || !ip || !bq || !bm) throw new Error('missing measurements')
  const ok = (b: boolean): string => (b ? 'PASS' : 'FAIL')
  console.log(
    `p50 ratio in-process/baseline: ${(ip.p50 / baseline.p50).toFixed(3)} (target <= 0.1: ${ok(ip.p50 / baseline.p50 <= 0.1)})`,
  )
  console.log(
    `p50 ratio BullMQ/baseline:     ${(bq.p50 / baseline.p50).toFixed(3)} (target <= 0.1: ${ok(bq.p50 / baseline.p50 <= 0.1)})`,
  )
  console.log(
    `BullMQ minus in-process p50:   ${(bq.p50 - ip.p50).toFixed(2)} ms fleet, ${(bm.p50 - ip.p50).toFixed(2)} ms queue only (target <= 3 ms: ${ok(bq.p50 - ip.p50 <= 3)})`,
  )

  for (const n of SESSION_COUNTS) await throughput('in-process + memory', inProc, n)
  for (const n of SESSION_COUNTS) await throughput('BullMQ + Redis store', bullRedis, n)
} finally {
  for (const p of paths) await p.close()
  await docker.destroy(baselineBox.ref)
  await docker.close()
}
