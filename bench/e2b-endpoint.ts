/**
 * A warm `commands.run('echo hi')` through the real `e2b` SDK against our E2B-compatible endpoint
 * (`sbx serve` as a child process, the sandbox one of its Docker sessions), side by side with the same
 * command through our own `POST /v1/exec` (wait=true) on the same server. Round robin, one process
 * drives every path. (Until the test fake was removed a third path ran the SDK against it.) BENCH_ITERATIONS (default 100, at most 1000) samples per path.
 *
 *   npx tsx bench/e2b-endpoint.ts         # needs the Docker engine
 */
import { E2B } from 'e2b'
import { removeScope, startSbxServer, uniqueName } from '../test/support/sbx-cli.js'
import { percentile } from './lib/percentile.js'

const iterations = Math.min(Math.max(Number(process.env.BENCH_ITERATIONS ?? 100) || 100, 10), 1000)
const warmup = 10

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
      `${k.padEnd(48)} n=${String(s.length).padStart(4)}  p50 ${percentile(s, 50).toFixed(2).padStart(7)} ms  p99 ${percentile(s, 99).toFixed(2).padStart(7)} ms`,
    )
  }
  return p50s
}

const scope = uniqueName('bench-e2bep')
const srv = await startSbxServer('serve', {
  config: { queue: { prefix: scope }, quotas: { requestsPerSecond: 100_000 } },
})
try {
  const ours = await new E2B({ apiKey: srv.key, apiUrl: srv.url, sandboxUrl: srv.url }).Sandbox.create('base')
  const session = `bench-${scope}`
  const run = (sbx: typeof ours) => async (): Promise<void> => {
    const r = await sbx.commands.run('echo hi')
    if (r.stdout !== 'hi\n') throw new Error(`unexpected output ${JSON.stringify(r.stdout)}`)
  }
  const p50 = await sideBySide({
    'e2b SDK → our endpoint (sbx serve, Docker)': run(ours),
    'POST /v1/exec?wait=true (same server)': async () => {
      const r = await srv.post('/v1/exec?wait=true', {
        provider: 'docker',
        profile: 'default',
        sessionId: session,
        command: 'echo hi',
      })
      const job = (await r.json()) as { result?: { stdout: string } }
      if (job.result?.stdout !== 'hi\n') throw new Error(`unexpected answer ${JSON.stringify(job)}`)
    },
  })
  const [e, x] = Object.values(p50) as [number, number]
  console.log(`ratio endpoint / v1-exec p50: ${(e / x).toFixed(2)}`)
  await ours.kill()
} finally {
  await srv.stop()
  await removeScope(scope)
}
