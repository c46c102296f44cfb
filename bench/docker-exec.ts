/**
 * A warm command through the Docker provider's long-lived agent channel vs a plain Engine API
 * `docker exec` per command (create + start + read to end + inspect), same image, same container.
 *
 *   npx tsx bench/docker-exec.ts            # BENCH_ITERATIONS (default 200, at most 2000)
 */
import type { Duplex } from 'node:stream'
import { createDockerProvider } from '../providers/docker/index.js'
import { resolveProfile } from '../src/sandbox/profiles.js'

const iterations = Math.min(Math.max(Number(process.env.BENCH_ITERATIONS ?? 200) || 200, 10), 2000)
const warmup = 10

function percentile(samples: number[], p: number): number {
  const sorted = [...samples].sort((a, b) => a - b)
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? NaN
}

async function measure(label: string, n: number, fn: () => Promise<void>): Promise<number> {
  for (let i = 0; i < warmup; i++) await fn()
  const samples: number[] = []
  for (let i = 0; i < n; i++) {
    const t = performance.now()
    await fn()
    samples.push(performance.now() - t)
  }
  const p50 = percentile(samples, 50)
  console.log(
    `${label.padEnd(44)} n=${String(n).padStart(4)}  p50 ${p50.toFixed(2).padStart(7)} ms  p99 ${percentile(samples, 99).toFixed(2).padStart(7)} ms`,
  )
  return p50
}

const provider = createDockerProvider()
const sandbox = await provider.create(resolveProfile('bench', { provider: 'docker' }), {
  labels: { 'sandbox-router.bench': 'docker-exec' },
})
try {
  const container = provider.docker.getContainer(sandbox.ref.id)
  const request = { command: 'echo hi', timeoutMs: 10_000, outputCapBytes: 1 << 20 }

  const channel = await measure('channel: exec `echo hi` (bash -c)', iterations, async () => {
    const r = await sandbox.exec(request)
    if (r.stdout !== 'hi\n') throw new Error(`unexpected output ${JSON.stringify(r.stdout)}`)
  })
  await measure('channel: agent round trip only (health ping)', iterations, async () => {
    if (!(await sandbox.health()).ok) throw new Error('sandbox unhealthy')
  })
  const baseline = await measure(
    'baseline: docker exec per command (bash -c)',
    Math.min(iterations, 100),
    async () => {
      const exec = await container.exec({
        Cmd: ['bash', '-c', 'echo hi'],
        AttachStdout: true,
        AttachStderr: true,
        User: '1000:1000',
      })
      const stream: Duplex = await exec.start({ hijack: true, stdin: false, Detach: false, Tty: false })
      let bytes = 0
      await new Promise<void>((resolve, reject) => {
        stream.on('data', (c: Buffer) => (bytes += c.length))
        stream.on('end', resolve)
        stream.on('error', reject)
      })
      const info = await exec.inspect()
      if (info.ExitCode !== 0 || bytes === 0) throw new Error(`baseline exec failed (${info.ExitCode})`)
    },
  )
  console.log(`p50 ratio baseline/channel: ${(baseline / channel).toFixed(1)}x`)
} finally {
  await provider.destroy(sandbox.ref)
  await provider.close()
}
