/**
 * gVisor (runsc) against runc, side by side in one process on the local engine, through the Docker
 * provider (agent channel included): a warm command's latency, a cold create → first result, and
 * the throughput of 8 sessions each running commands back to back. Runtimes alternate round by
 * round, so machine noise hits both alike. Needs runsc registered (scripts/setup-gvisor.sh).
 *
 *   npx tsx bench/gvisor.ts     # BENCH_ITERATIONS warm commands (default 200), BENCH_COLD creates
 *                               # (default 10), BENCH_THROUGHPUT_S seconds per runtime (default 5)
 */
import { createDockerProvider } from '../providers/docker/index.js'
import { resolveProfile } from '../src/sandbox/profiles.js'
import type { SandboxRuntime } from '../src/sandbox/profiles.js'
import type { Sandbox } from '../src/sandbox/types.js'

const iterations = Math.min(Math.max(Number(process.env.BENCH_ITERATIONS ?? 200) || 200, 10), 2000)
const colds = Math.min(Math.max(Number(process.env.BENCH_COLD ?? 10) || 10, 2), 100)
const throughputS = Math.min(Math.max(Number(process.env.BENCH_THROUGHPUT_S ?? 5) || 5, 1), 60)
const SESSIONS = 8
const RUNTIMES: readonly SandboxRuntime[] = ['runc', 'runsc']
const labels = { 'sandbox-router.bench': `gvisor-${process.pid}` }

const provider = createDockerProvider({ instanceId: `bench-gvisor-${process.pid}` })
const profiles = Object.fromEntries(
  RUNTIMES.map((runtime) => [runtime, resolveProfile(`bench-${runtime}`, { provider: 'docker', runtime })]),
) as Record<SandboxRuntime, ReturnType<typeof resolveProfile>>

function percentile(samples: number[], p: number): number {
  const sorted = [...samples].sort((a, b) => a - b)
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? NaN
}

async function echo(sb: Sandbox): Promise<void> {
  const r = await sb.exec({ command: 'echo hi', timeoutMs: 10_000, outputCapBytes: 4096 })
  if (r.stdout !== 'hi\n') throw new Error(`unexpected output ${JSON.stringify(r)}`)
}

const created: Sandbox[] = []
async function create(runtime: SandboxRuntime): Promise<Sandbox> {
  const sb = await provider.create(profiles[runtime], { labels })
  created.push(sb)
  return sb
}

try {
  const warm: Record<string, number[]> = { runc: [], runsc: [] }
  const cold: Record<string, number[]> = { runc: [], runsc: [] }
  const perSecond: Record<string, number> = {}

  // Warm: one sandbox per runtime, alternating 10-call rounds.
  const warmBoxes = { runc: await create('runc'), runsc: await create('runsc') }
  for (const rt of RUNTIMES) for (let i = 0; i < 10; i++) await echo(warmBoxes[rt])
  for (let round = 0; round < iterations / 10; round++) {
    for (const rt of RUNTIMES) {
      for (let i = 0; i < 10; i++) {
        const t = performance.now()
        await echo(warmBoxes[rt])
        warm[rt]?.push(performance.now() - t)
      }
    }
  }

  // Cold: create → first result, then destroy, alternating.
  for (let i = 0; i < colds; i++) {
    for (const rt of RUNTIMES) {
      const t = performance.now()
      const sb = await create(rt)
      await echo(sb)
      cold[rt]?.push(performance.now() - t)
      await provider.destroy(sb.ref)
    }
  }

  // Throughput: 8 sandboxes, each running `echo hi` back to back for throughputS seconds.
  for (const rt of RUNTIMES) {
    const boxes = await Promise.all(Array.from({ length: SESSIONS }, () => create(rt)))
    for (const sb of boxes) await echo(sb)
    const until = performance.now() + throughputS * 1000
    const counts = await Promise.all(
      boxes.map(async (sb) => {
        let n = 0
        while (performance.now() < until) {
          await echo(sb)
          n++
        }
        return n
      }),
    )
    perSecond[rt] = counts.reduce((a, b) => a + b, 0) / throughputS
    await Promise.all(boxes.map((sb) => provider.destroy(sb.ref)))
  }

  const p50 = (rt: string, s: Record<string, number[]>): number => percentile(s[rt] ?? [], 50)
  const p99 = (rt: string, s: Record<string, number[]>): number => percentile(s[rt] ?? [], 99)
  for (const rt of RUNTIMES) {
    console.log(
      `${rt.padEnd(6)} warm echo p50 ${p50(rt, warm).toFixed(2).padStart(7)} ms  p99 ${p99(rt, warm).toFixed(2).padStart(7)} ms` +
        ` | cold create→first result p50 ${p50(rt, cold).toFixed(0).padStart(5)} ms  p99 ${p99(rt, cold).toFixed(0).padStart(5)} ms` +
        ` | ${SESSIONS} sessions ${(perSecond[rt] ?? 0).toFixed(0).padStart(5)} commands/s`,
    )
  }
  console.log(
    `runsc / runc: warm p50 ×${(p50('runsc', warm) / p50('runc', warm)).toFixed(2)}, ` +
      `cold p50 ×${(p50('runsc', cold) / p50('runc', cold)).toFixed(2)}, ` +
      `throughput ×${((perSecond['runsc'] ?? 0) / (perSecond['runc'] ?? 1)).toFixed(2)} ` +
      `(n warm ${iterations}, cold ${colds}, ${throughputS} s of ${SESSIONS} sessions each)`,
  )
} finally {
  await Promise.allSettled(created.map((sb) => provider.destroy(sb.ref)))
  await provider.close()
}
