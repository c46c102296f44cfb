/**
 * A warm `echo hi` in the sandbox's persistent shell vs the fresh-shell path (a new `bash -c` per
 * command), side by side: same process, same container, same agent channel, samples taken round
 * robin (fresh, persistent, ping, fresh, ...) so a noisy neighbour slows every path alike. The ping
 * frame is the channel's bare round trip: what is left once no bash starts.
 *
 * Then the same through the service's routed path (router → in-process queue → worker → session
 * pool → channel), one session per path, with the profile's `shell` set to each mode.
 *
 *   npx tsx bench/persistent-shell.ts        # BENCH_ITERATIONS (default 500, at most 5000)
 */
import { createDockerProvider } from '../providers/docker/index.js'
import { resolveProfile } from '../src/sandbox/profiles.js'
import type { ExecRequest } from '../src/sandbox/types.js'
import { createRoutedPath } from './lib/routed-path.js'
import { percentile } from './lib/percentile.js'

const iterations = Math.min(Math.max(Number(process.env.BENCH_ITERATIONS ?? 500) || 500, 20), 5000)
const warmup = 20

/** Times each path `iterations` times, round robin; prints p50 / p99; returns the p50s. */
async function roundRobin(paths: [string, () => Promise<void>][]): Promise<number[]> {
  for (let i = 0; i < warmup; i++) for (const [, fn] of paths) await fn()
  const samples = paths.map(() => [] as number[])
  for (let i = 0; i < iterations; i++) {
    for (const [k, [, fn]] of paths.entries()) {
      const t = performance.now()
      await fn()
      samples[k]!.push(performance.now() - t)
    }
  }
  return paths.map(([label], k) => {
    const p50 = percentile(samples[k]!, 50)
    console.log(
      `${label.padEnd(52)} n=${String(iterations).padStart(5)}  p50 ${p50.toFixed(2).padStart(6)} ms  p99 ${percentile(samples[k]!, 99).toFixed(2).padStart(6)} ms`,
    )
    return p50
  })
}

const provider = createDockerProvider()
const sandbox = await provider.create(resolveProfile('bench', { provider: 'docker' }), {
  labels: { 'sandbox-router.bench': 'persistent-shell' },
})
try {
  const base: ExecRequest = { command: 'echo hi', timeoutMs: 10_000, outputCapBytes: 1 << 20 }
  const p50s = await roundRobin([
    [
      'fresh shell: `echo hi` (bash -c per command)',
      async () => {
        const r = await sandbox.exec(base)
        if (r.stdout !== 'hi\n') throw new Error(`unexpected output ${JSON.stringify(r.stdout)}`)
      },
    ],
    [
      'persistent shell: `echo hi`',
      async () => {
        const r = await sandbox.exec({ ...base, shell: 'persistent' })
        if (r.stdout !== 'hi\n' || r.shellRestarted) throw new Error(`unexpected result ${JSON.stringify(r)}`)
      },
    ],
    [
      'channel round trip only (ping frame)',
      async () => {
        if (!(await sandbox.health()).ok) throw new Error('sandbox unhealthy')
      },
    ],
  ])
  console.log(`p50 fresh/persistent: ${(p50s[0]! / p50s[1]!).toFixed(1)}x`)
  const routed = await Promise.all(
    (['fresh', 'persistent'] as const).map((shell) =>
      createRoutedPath({
        providers: [provider],
        profile: { provider: 'docker', shell },
        queue: 'in-process',
        store: 'memory',
      }),
    ),
  )
  try {
    const [fresh, persistent] = routed as [(typeof routed)[0], (typeof routed)[0]]
    const r = await roundRobin([
      ['routed (in-process queue), profile shell fresh', () => fresh.run('bench')],
      ['routed (in-process queue), profile shell persistent', () => persistent.run('bench')],
    ])
    console.log(`routed p50 fresh/persistent: ${(r[0]! / r[1]!).toFixed(1)}x`)
  } finally {
    for (const path of routed) await path.close()
  }
} finally {
  await provider.destroy(sandbox.ref)
  await provider.close()
}
