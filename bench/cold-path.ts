/**
 * Cold path: a new session's first command when no warm sandbox exists — session pool acquire
 * (create the hardened container, start it, open the agent channel) + `echo hi` — against
 * `docker run --rm` of the same image doing the same `echo hi` (until its output is back), interleaved
 * in one process. Also the
 * warm-pool path: acquire from a pool kept at minIdle.
 *
 *   npx tsx bench/cold-path.ts          # BENCH_ITERATIONS (default 20, at most 100)
 */
import { spawn } from 'node:child_process'
import { createDockerProvider } from '../providers/docker/index.js'
import { ProviderRegistry } from '../src/sandbox/registry.js'
import { createSessionPool } from '../src/sessions/pool.js'
import { MemorySessionStore } from '../src/sessions/store/memory.js'

const n = Math.min(Math.max(Number(process.env['BENCH_ITERATIONS'] ?? 20) || 20, 5), 100)
const IMAGE = 'sandbox-router/base:latest'

const p = (xs: number[], q: number): number =>
  [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(q * xs.length))] ?? NaN

function dockerRun(): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn('docker', ['run', '--rm', '--network', 'none', IMAGE, 'bash', '-c', 'echo hi'], {
      stdio: ['ignore', 'pipe', 'inherit'],
    })
    let out = ''
    child.stdout.on('data', (d: Buffer) => (out += d.toString()))
    child.on('error', reject)
    child.on('exit', (code) =>
      code === 0 && out === 'hi\n' ? resolve() : reject(new Error(`docker run: ${code} ${out}`)),
    )
  })
}

const registry = new ProviderRegistry().register(createDockerProvider())
registry.addProfile('cold', { provider: 'docker' })
registry.addProfile('warm', { provider: 'docker', pool: { minIdle: 2, maxSize: 8 } })
const pool = createSessionPool({
  providers: registry,
  store: new MemorySessionStore(),
  scope: `bench${process.pid}`,
  prewarm: [{ providerId: 'docker', profile: 'warm' }],
})
const request = { command: 'echo hi', timeoutMs: 10_000, outputCapBytes: 65_536 }

/** Times acquire → first result; the ephemeral sandbox's destroy happens after, off the clock (as the worker does). */
async function first(profile: string, into?: number[]): Promise<void> {
  const t = performance.now()
  const lease = await pool.acquire({ tenant: 'bench', providerId: 'docker', profile })
  try {
    const r = await lease.sandbox.exec(request)
    if (r.stdout !== 'hi\n') throw new Error('unexpected output')
    into?.push(performance.now() - t)
  } finally {
    await lease.release()
  }
}

const cold: number[] = []
const run: number[] = []
const warm: number[] = []
const time = async (into: number[], fn: () => Promise<void>): Promise<void> => {
  const t = performance.now()
  await fn()
  into.push(performance.now() - t)
}
try {
  await first('cold')
  await dockerRun()
  for (let i = 0; i < n; i++) {
    await first('cold', cold)
    await time(run, dockerRun)
    await pool.warmSettled()
    await first('warm', warm)
  }
  const row = (label: string, xs: number[]) =>
    console.log(
      `${label.padEnd(52)} p50 ${p(xs, 0.5).toFixed(1).padStart(7)} ms  p99 ${p(xs, 0.99).toFixed(1).padStart(7)} ms`,
    )
  row('cold: pool create + first `echo hi` (ephemeral)', cold)
  row('baseline: `docker run --rm` same image, `echo hi`', run)
  row('warm pool: claim + `echo hi` (ephemeral)', warm)
  console.log(`cold / docker run p50 ratio: ${(p(cold, 0.5) / p(run, 0.5)).toFixed(2)} (target <= 1.2)`)
  console.log(`warm / docker run p50 ratio: ${(p(warm, 0.5) / p(run, 0.5)).toFixed(3)}`)
} finally {
  await pool.shutdown({ destroyIdle: true })
  await registry.close()
}
