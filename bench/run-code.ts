/**
 * The code interpreter's warm `runCode('1+1')` (python kernel already running, state kept) side by
 * side with a warm exec of `python3 -c 1+1` (a new interpreter per call) and a fresh-shell `true`
 * (the channel's floor), in one dev-image Docker sandbox, samples taken round robin. Prints p50 /
 * p99 and each p50 over the `python3 -c` baseline's.
 *
 *   npx tsx bench/run-code.ts        # BENCH_ITERATIONS (default 200, at most 2000)
 */
import { createDockerProvider } from '../providers/docker/index.js'
import { runKernelCode } from '../src/sandbox/code/index.js'
import { DEV_IMAGE, resolveProfile } from '../src/sandbox/profiles.js'
import type { ExecRequest } from '../src/sandbox/types.js'
import { percentile } from './lib/percentile.js'

const iterations = Math.min(Math.max(Number(process.env.BENCH_ITERATIONS ?? 200) || 200, 20), 2000)
const warmup = 10

const provider = createDockerProvider()
const sandbox = await provider.create(
  resolveProfile('bench', { provider: 'docker', image: DEV_IMAGE, network: 'none' }),
  { labels: { 'sandbox-router.bench': 'run-code' } },
)
try {
  const exec = (command: string): ExecRequest => ({ command, timeoutMs: 10_000, outputCapBytes: 1 << 20 })
  const paths: [string, () => Promise<void>][] = [
    [
      'baseline: exec `python3 -c 1+1`',
      async () => {
        const r = await sandbox.exec(exec('python3 -c "print(1+1)"'))
        if (r.stdout !== '2\n') throw new Error(`unexpected output ${r.stdout}`)
      },
    ],
    [
      "runCode('1+1') (warm python kernel)",
      async () => {
        const r = await runKernelCode(sandbox, { code: '1+1', language: 'python', timeoutMs: 10_000 })
        if (r.text !== '2') throw new Error(`unexpected result ${JSON.stringify(r)}`)
      },
    ],
    [
      "runCode('1+1') (warm javascript kernel)",
      async () => {
        const r = await runKernelCode(sandbox, { code: '1+1', language: 'javascript', timeoutMs: 10_000 })
        if (r.text !== '2') throw new Error(`unexpected result ${JSON.stringify(r)}`)
      },
    ],
    [
      'exec `node -e 1+1`',
      async () => {
        const r = await sandbox.exec(exec('node -p 1+1'))
        if (r.stdout !== '2\n') throw new Error(`unexpected output ${r.stdout}`)
      },
    ],
    ['floor: fresh-shell `true`', async () => void (await sandbox.exec(exec('true')))],
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
      `${label.padEnd(42)} n=${String(iterations).padStart(5)}  p50 ${p50s[k]!.toFixed(2).padStart(7)} ms  ` +
        `p99 ${percentile(samples[k]!, 99).toFixed(2).padStart(7)} ms  p50/baseline ${(p50s[k]! / p50s[0]!).toFixed(2)}`,
    )
  }
} finally {
  await provider.destroy(sandbox.ref)
  await provider.close?.()
}
