/**
 * A warm `echo hi` through the E2B provider (real e2b SDK → HTTP/1.1 → our E2B endpoint, `sbx serve`
 * on Docker, behind the tests' recording proxy), side by side with what the endpoint itself spends
 * serving the command (its Start call as the proxy times it), the SDK's own `commands.run` without
 * our wrapper, and a bare docker exec in the same container. The difference between the first two is
 * the adapter + SDK + transport overhead on this machine.
 *
 *   npx tsx bench/e2b-exec.ts            # BENCH_ITERATIONS (default 100, at most 1000)
 */
import type { Duplex } from 'node:stream'
import Docker from 'dockerode'
import { E2B } from 'e2b'
import { createE2BProvider } from '../providers/e2b/index.js'
import { resolveProfile } from '../src/sandbox/profiles.js'
import { startE2BEndpoint } from '../test/support/e2b-endpoint.js'

const iterations = Math.min(Math.max(Number(process.env.BENCH_ITERATIONS ?? 100) || 100, 10), 1000)
const warmup = 10

function percentile(samples: number[], p: number): number {
  const sorted = [...samples].sort((a, b) => a - b)
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? NaN
}

function report(label: string, samples: number[]): number {
  const p50 = percentile(samples, 50)
  console.log(
    `${label.padEnd(52)} n=${String(samples.length).padStart(4)}  p50 ${p50.toFixed(2).padStart(7)} ms  p99 ${percentile(samples, 99).toFixed(2).padStart(7)} ms`,
  )
  return p50
}

/** Runs `fn` after a warmup; returns the client-side times and the endpoint's time for its Start call. */
async function measure(fn: () => Promise<void>, startCalls: () => number[]): Promise<[number[], number[]]> {
  for (let i = 0; i < warmup; i++) await fn()
  const client: number[] = []
  const server: number[] = []
  for (let i = 0; i < iterations; i++) {
    const before = startCalls().length
    const t = performance.now()
    await fn()
    client.push(performance.now() - t)
    // The command's own Start call (the first one this iteration made).
    const own = startCalls()[before]
    if (own !== undefined) server.push(own)
  }
  return [client, server]
}

const endpoint = await startE2BEndpoint({ tag: 'bench-e2bexec' })
const provider = createE2BProvider({
  apiKey: endpoint.apiKey,
  apiUrl: endpoint.apiUrl,
  sandboxUrl: endpoint.sandboxUrl,
})
const sandbox = await provider.create(resolveProfile('bench', { provider: 'e2b' }), {
  labels: { 'sandbox-router.bench': 'e2b-exec' },
})
try {
  const startCalls = (): number[] =>
    endpoint.requests
      .filter((r) => r.sandboxId === sandbox.ref.id && r.path === '/process.Process/Start')
      .map((r) => r.durationMs ?? NaN)
  const request = { command: 'echo hi', timeoutMs: 10_000, outputCapBytes: 1 << 20 }

  const [adapter, adapterServer] = await measure(async () => {
    const r = await sandbox.exec(request)
    if (r.stdout !== 'hi\n') throw new Error(`unexpected output ${JSON.stringify(r.stdout)}`)
  }, startCalls)
  const adapterP50 = report('adapter: exec `echo hi` (wrapper, end to end)', adapter)
  const serverP50 = report('  endpoint: its Start call for that command', adapterServer)
  report(
    '  overhead per command (end to end − endpoint)',
    adapter.map((t, i) => t - (adapterServer[i] ?? NaN)),
  )

  const sdk = await new E2B({
    apiKey: endpoint.apiKey,
    apiUrl: endpoint.apiUrl,
    sandboxUrl: endpoint.sandboxUrl,
  }).Sandbox.connect(sandbox.ref.id)
  const [direct, directServer] = await measure(async () => {
    const r = await sdk.commands.run('echo hi')
    if (r.stdout !== 'hi\n') throw new Error(`unexpected output ${JSON.stringify(r.stdout)}`)
  }, startCalls)
  report('sdk: commands.run `echo hi` (no wrapper)', direct)
  report('  endpoint: its Start call for that command', directServer)

  const container = new Docker().getContainer((await endpoint.containerOf(sandbox.ref.id)) ?? '')
  const [bare] = await measure(
    async () => {
      const exec = await container.exec({
        Cmd: ['bash', '-c', 'echo hi'],
        AttachStdout: true,
        AttachStderr: true,
      })
      const stream = (await exec.start({ hijack: true, stdin: false })) as Duplex
      await new Promise<void>((resolve, reject) => {
        stream.on('data', () => undefined)
        stream.on('end', resolve)
        stream.on('error', reject)
      })
      if ((await exec.inspect()).ExitCode !== 0) throw new Error('bare exec failed')
    },
    () => [],
  )
  report('baseline: bare docker exec `bash -c "echo hi"`', bare)
  console.log(
    `adapter overhead over the endpoint's own time: p50 ${(adapterP50 - serverP50).toFixed(2)} ms ` +
      `(${((100 * (adapterP50 - serverP50)) / adapterP50).toFixed(0)}% of end to end)`,
  )
} finally {
  await provider.destroy(sandbox.ref)
  await provider.close()
  await endpoint.close()
}
