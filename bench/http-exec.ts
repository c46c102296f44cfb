/**
 * A warm `echo hi` in a bound session through the HTTP API of the processes a user starts — `sbx serve`
 * (embedded) and `sbx api` + `sbx worker` (fleet, on Redis) — against a plain dockerode `exec` per
 * command in this process, and against the same routed path in-process (no HTTP, no child process).
 * Round robin, one process drives all paths, so a noisy neighbour slows each alike.
 * BENCH_ITERATIONS (default 300, at most 2000) samples per path. The fleet runs once per queue
 * driver (bullmq, redis), each its own api + worker.
 *
 *   npx tsx bench/http-exec.ts            # needs the Docker engine and Redis (REDIS_URL)
 */
import type { Duplex } from 'node:stream'
import { createDockerProvider } from '../providers/docker/index.js'
import { resolveProfile } from '../src/sandbox/profiles.js'
import { createRoutedPath, REDIS_URL } from './lib/routed-path.js'
import { startSbxServer, startSbxWorker } from '../test/support/sbx-cli.js'
import { percentile } from './lib/percentile.js'

const iterations = Math.min(Math.max(Number(process.env.BENCH_ITERATIONS ?? 300) || 300, 20), 2000)
const warmup = 20

async function sideBySide(paths: Record<string, () => Promise<void>>): Promise<Record<string, number>> {
  const entries = Object.entries(paths)
  for (let i = 0; i < warmup; i++) for (const [, fn] of entries) await fn()
  const samples = new Map<string, number[]>(entries.map(([k]) => [k, []]))
  for (let i = 0; i < iterations; i++)
    for (const [k, fn] of entries) {
      const t = performance.now()
      await fn()
      samples.get(k)?.push(performance.now() - t)
    }
  const p50s: Record<string, number> = {}
  for (const [k] of entries) {
    const s = samples.get(k) ?? []
    p50s[k] = percentile(s, 50)
    console.log(
      `${k.padEnd(46)} n=${String(s.length).padStart(4)}  p50 ${percentile(s, 50).toFixed(2).padStart(7)} ms  p99 ${percentile(s, 99).toFixed(2).padStart(7)} ms`,
    )
  }
  return p50s
}

const docker = createDockerProvider()
const box = await docker.create(resolveProfile('bench', { provider: 'docker' }), {
  labels: { 'sandbox-router.bench': 'http-exec' },
})
const procs: { stop(): Promise<void> }[] = []
const inProc = await createRoutedPath({
  providers: [docker],
  profile: { provider: 'docker' },
  queue: 'in-process',
  store: 'memory',
})
try {
  const container = docker.docker.getContainer(box.ref.id)
  const baseline = async (): Promise<void> => {
    const exec = await container.exec({
      Cmd: ['bash', '-c', 'echo hi'],
      AttachStdout: true,
      AttachStderr: true,
    })
    const stream: Duplex = await exec.start({ hijack: true, stdin: false, Detach: false, Tty: false })
    await new Promise<void>((resolve, reject) => {
      stream.on('data', () => undefined)
      stream.on('end', resolve)
      stream.on('error', reject)
    })
  }
  const tag = `bhttp${Date.now().toString(36)}`
  const quiet = { LOG_LEVEL: 'warn' }
  const serve = await startSbxServer('serve', { config: { queue: { prefix: `${tag}e` } }, env: quiet })
  procs.push(serve)
  const fleets: Record<string, typeof serve> = {}
  for (const driver of ['bullmq', 'redis'] as const) {
    const fleet = { queue: { driver, redisUrl: REDIS_URL, prefix: `${tag}${driver[0]}` } }
    const api = await startSbxServer('api', { config: fleet, env: quiet })
    procs.push(api)
    procs.push(await startSbxWorker({ config: fleet, env: quiet }))
    fleets[`HTTP POST /v1/exec → sbx api + sbx worker (${driver})`] = api
  }

  const viaHttp = (p: typeof serve) => async (): Promise<void> => {
    const res = await p.post('/v1/exec', {
      provider: 'docker',
      profile: 'default',
      sessionId: 'warm',
      command: 'echo hi',
    })
    const job = (await res.json()) as { state: string }
    if (job.state !== 'completed') throw new Error(`job ${job.state}`)
  }
  const p50 = await sideBySide({
    'baseline: dockerode exec per command': baseline,
    'routed in-process (no HTTP)': () => inProc.run('warm'),
    'HTTP POST /v1/exec → sbx serve (embedded)': viaHttp(serve),
    ...Object.fromEntries(Object.entries(fleets).map(([k, api]) => [k, viaHttp(api)])),
  })
  const base = p50['baseline: dockerode exec per command'] ?? NaN
  const lib = p50['routed in-process (no HTTP)'] ?? NaN
  const embedded = p50['HTTP POST /v1/exec → sbx serve (embedded)'] ?? NaN
  for (const k of ['HTTP POST /v1/exec → sbx serve (embedded)', ...Object.keys(fleets)]) {
    const v = p50[k] ?? NaN
    console.log(
      `${k.padEnd(56)} p50/baseline ${(v / base).toFixed(3)}   minus in-process ${(v - lib).toFixed(2)} ms   minus embedded ${(v - embedded).toFixed(2)} ms`,
    )
  }
} finally {
  for (const p of procs.reverse()) await p.stop()
  await inProc.close()
  await docker.destroy(box.ref)
  await docker.close()
}
