/**
 * Dev image cold start: a new sandbox of the built-in `dev` profile (create the hardened container
 * from sandbox-router/dev, which has no agent inside: the provider mounts its agent volume; start
 * it; open the agent channel) and its first command, against `docker run --rm` of the same image
 * running the same command until its output is back. Interleaved in one process; the sandbox's
 * destroy is off the clock (as the worker does it). Two commands: `echo hi` and `python3 -c`.
 *
 *   npx tsx bench/dev-cold-start.ts        # BENCH_ITERATIONS (default 10, at most 50)
 *
 * Needs the dev image (`sbx image build dev`).
 */
import { spawn } from 'node:child_process'
import { createDockerProvider } from '../providers/docker/index.js'
import { DEV_IMAGE, DEV_PROFILE, resolveProfile } from '../src/sandbox/profiles.js'

const n = Math.min(Math.max(Number(process.env['BENCH_ITERATIONS'] ?? 10) || 10, 3), 50)
const labels = { 'sandbox-router.bench': `dev-cold-start-${process.pid}` }
const profile = resolveProfile('dev', DEV_PROFILE)
const provider = createDockerProvider({ instanceId: 'bench-dev-cold-start' })

const p = (xs: number[], q: number): number =>
  [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(q * xs.length))] ?? NaN

const COMMANDS = { echo: 'echo hi', python: `python3 -c 'print("hi")'` } as const

function dockerRun(command: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn('docker', ['run', '--rm', '--network', 'none', DEV_IMAGE, 'bash', '-c', command], {
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

/** create + first command; returns the ms, then destroys the sandbox off the clock. */
async function coldStart(command: string): Promise<number> {
  const t = performance.now()
  const sb = await provider.create(profile, { labels })
  try {
    const r = await sb.exec({ command, timeoutMs: 30_000, outputCapBytes: 65_536 })
    if (r.stdout !== 'hi\n') throw new Error(`unexpected output: ${JSON.stringify(r)}`)
    return performance.now() - t
  } finally {
    await provider.destroy(sb.ref)
  }
}

const runs: Record<string, { cold: number[]; run: number[] }> = {}
try {
  // Warm-up: the first create fills the agent volume (once per engine and agent build).
  await coldStart(COMMANDS.echo)
  await dockerRun(COMMANDS.echo)
  for (const [name, command] of Object.entries(COMMANDS)) {
    const r: { cold: number[]; run: number[] } = { cold: [], run: [] }
    runs[name] = r
    for (let i = 0; i < n; i++) {
      r.cold.push(await coldStart(command))
      const t = performance.now()
      await dockerRun(command)
      r.run.push(performance.now() - t)
    }
  }
  const row = (label: string, xs: number[]) =>
    console.log(
      `${label.padEnd(58)} p50 ${p(xs, 0.5).toFixed(1).padStart(7)} ms  p99 ${p(xs, 0.99).toFixed(1).padStart(7)} ms`,
    )
  console.log(`${DEV_IMAGE}, ${n} iterations each`)
  for (const [name, command] of Object.entries(COMMANDS)) {
    const r = runs[name]!
    row(`dev profile: create + first \`${command}\``, r.cold)
    row(`baseline: \`docker run --rm\` same image, same command`, r.run)
    console.log(`  ratio p50 (sandbox / docker run): ${(p(r.cold, 0.5) / p(r.run, 0.5)).toFixed(2)}`)
  }
} finally {
  for (const ref of await provider.list({ labels })) await provider.destroy(ref)
  await provider.close()
}
