/**
 * A warm `echo hi` through the Daytona adapter (real SDK → HTTP → the local fake → a real
 * container) next to the time the fake itself spent on each `/process/execute`, in one process.
 * The difference is the adapter's overhead: SDK + HTTP + JSON + the in-sandbox wrapper's parsing
 * on our side. A bare SDK `executeCommand('echo hi')` (no wrapper) is measured the same way, to
 * show what the wrapper costs inside the sandbox.
 *
 *   npx tsx bench/daytona-exec.ts            # BENCH_ITERATIONS (default 200, at most 2000)
 */
import { createDaytonaProvider } from '../providers/daytona/index.js'
import { resolveProfile } from '../src/sandbox/profiles.js'
import { startFakeDaytona } from '../test/fakes/daytona/index.js'

const iterations = Math.min(Math.max(Number(process.env.BENCH_ITERATIONS ?? 200) || 200, 10), 2000)
const warmup = 10
const EXECUTE = 'POST /process/execute'

function percentile(samples: number[], p: number): number {
  const sorted = [...samples].sort((a, b) => a - b)
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? NaN
}

const row = (label: string, samples: number[]): void =>
  console.log(
    `${label.padEnd(50)} n=${String(samples.length).padStart(4)}  p50 ${percentile(samples, 50).toFixed(2).padStart(7)} ms` +
      `  p99 ${percentile(samples, 99).toFixed(2).padStart(7)} ms`,
  )

/** Runs `fn` warm; returns the client-side times and the fake's own handling times of the same calls. */
async function measure(fn: () => Promise<void>): Promise<{ client: number[]; server: number[] }> {
  for (let i = 0; i < warmup; i++) await fn()
  const client: number[] = []
  const server: number[] = []
  for (let i = 0; i < iterations; i++) {
    const before = fake.timings.get(EXECUTE)?.length ?? 0
    const t = performance.now()
    await fn()
    client.push(performance.now() - t)
    const handled = fake.timings.get(EXECUTE)?.slice(before) ?? []
    server.push(handled.reduce((a, b) => a + b, 0))
  }
  return { client, server }
}

const fake = await startFakeDaytona()
const provider = createDaytonaProvider({ apiKey: fake.apiKey, apiUrl: fake.apiUrl, eventStreaming: false })
const sandbox = await provider.create(resolveProfile('bench', { provider: 'daytona' }), {
  labels: { 'sandbox-router.bench': 'daytona-exec' },
})
try {
  const remote = (await provider.daytona.get(sandbox.ref.id)).process
  const adapter = await measure(async () => {
    const r = await sandbox.exec({ command: 'echo hi', timeoutMs: 10_000, outputCapBytes: 1 << 20 })
    if (r.stdout !== 'hi\n' || r.stderr !== '') throw new Error(`unexpected output ${JSON.stringify(r)}`)
  })
  const bare = await measure(async () => {
    const r = await remote.executeCommand('echo hi', undefined, undefined, 10)
    if (r.result !== 'hi\n') throw new Error(`unexpected output ${JSON.stringify(r.result)}`)
  })
  row('adapter: sandbox.exec `echo hi` (end to end)', adapter.client)
  row("  fake's own /process/execute time (wrapper run)", adapter.server)
  const overhead = adapter.client.map((c, i) => c - (adapter.server[i] ?? 0))
  row('  overhead: SDK + HTTP + JSON + parsing', overhead)
  row('bare SDK executeCommand `echo hi` (no wrapper)', bare.client)
  row("  fake's own /process/execute time (bare)", bare.server)
  const p50 = (s: number[]): number => percentile(s, 50)
  console.log(
    `p50 wrapper cost inside the sandbox: ${(p50(adapter.server) - p50(bare.server)).toFixed(2)} ms; ` +
      `adapter overhead over the fake's own time: ${p50(overhead).toFixed(2)} ms`,
  )
} finally {
  await provider.destroy(sandbox.ref)
  await provider.close()
  await fake.close()
}
