/**
 * Background-process operations of the Docker provider (each one a short run of the agent binary's
 * `--proc-*` mode over the sandbox's channel), side by side with their baseline, a warm fresh-shell
 * `echo hi` through the same channel: same process, same container, samples taken round robin so a
 * noisy neighbour slows every path alike. Prints p50 / p99 and each p50 over the baseline's.
 *
 *   npx tsx bench/background-processes.ts        # BENCH_ITERATIONS (default 200, at most 2000)
 */
import { createDockerProvider } from '../providers/docker/index.js'
import { resolveProfile } from '../src/sandbox/profiles.js'
import type { ExecRequest } from '../src/sandbox/types.js'
import { percentile } from './lib/percentile.js'

const iterations = Math.min(Math.max(Number(process.env.BENCH_ITERATIONS ?? 200) || 200, 20), 2000)
const warmup = 10

const provider = createDockerProvider()
const sandbox = await provider.create(resolveProfile('bench', { provider: 'docker' }), {
  labels: { 'sandbox-router.bench': 'background-processes' },
})
try {
  const processes = sandbox.processes
  if (!processes) throw new Error('the Docker sandbox has no processes')
  const limits = { outputBufferBytes: 1 << 20, maxRunning: 16 }
  // One process with 1 MiB of output buffered (it then sleeps), one that swallows its stdin.
  await processes.start('bench-out', {
    ...limits,
    command: 'head -c 1048576 /dev/zero | tr "\\0" x; sleep 3600',
  })
  await processes.start('bench-in', { ...limits, command: 'cat > /dev/null' })
  for (let o = await processes.read('bench-out', { stdoutOffset: 0, stderrOffset: 0, maxBytes: 0 }); ;) {
    if (o.process.stdoutBytes >= 1 << 20) break
    o = await processes.read('bench-out', {
      stdoutOffset: o.process.stdoutBytes,
      stderrOffset: 0,
      maxBytes: 0,
      waitMs: 5_000,
    })
  }
  const base: ExecRequest = { command: 'echo hi', timeoutMs: 10_000, outputCapBytes: 1 << 20 }
  const stdin = new Uint8Array(100).fill(120)
  let n = 0
  const paths: [string, () => Promise<void>][] = [
    [
      'baseline: fresh-shell `echo hi`',
      async () => {
        if ((await sandbox.exec(base)).stdout !== 'hi\n') throw new Error('unexpected output')
      },
    ],
    ['list (2 processes)', async () => void (await processes.list())],
    [
      'read, nothing new (offset at the end)',
      async () =>
        void (await processes.read('bench-out', {
          stdoutOffset: 1 << 20,
          stderrOffset: 0,
          maxBytes: 65_536,
        })),
    ],
    [
      'read 64 KiB',
      async () => {
        const o = await processes.read('bench-out', { stdoutOffset: 0, stderrOffset: 0, maxBytes: 65_536 })
        if (o.stdout.data.length !== 65_536) throw new Error('short read')
      },
    ],
    ['write 100 bytes to stdin', async () => void (await processes.writeStdin('bench-in', stdin, false))],
    [
      'start `true` + remove',
      async () => {
        const id = `bench-${n++}`
        await processes.start(id, { ...limits, command: 'true' })
        await processes.remove(id)
      },
    ],
  ]
  for (let i = 0; i < warmup; i++) for (const [, fn] of paths) await fn()
  const samples = paths.map(() => [] as number[])
  for (let i = 0; i < iterations; i++) {
    for (const [k, [, fn]] of paths.entries()) {
      const t = performance.now()
      await fn()
      samples[k]!.push(performance.now() - t)
    }
  }
  const p50s = samples.map((s) => percentile(s, 50))
  for (const [k, [label]] of paths.entries()) {
    console.log(
      `${label.padEnd(40)} n=${String(iterations).padStart(5)}  p50 ${p50s[k]!.toFixed(2).padStart(6)} ms  ` +
        `p99 ${percentile(samples[k]!, 99).toFixed(2).padStart(6)} ms  p50/baseline ${(p50s[k]! / p50s[0]!).toFixed(2)}`,
    )
  }
} finally {
  await provider.destroy(sandbox.ref)
  await provider.close?.()
}
