/**
 * A warm `echo hi` in the persistent shell vs the fresh path, on the Daytona and the E2B adapters
 * against the local Daytona fake and our own E2B endpoint (`sbx serve` on Docker) (real SDKs → HTTP
 * on 127.0.0.1 → a real container), side by side: one
 * process, one sandbox per provider, samples taken round robin (fresh, persistent, fresh, ...) so
 * a noisy neighbour slows both paths alike. Both are local: the figures show what each path
 * costs in round trips and in-sandbox work, not what the real services' networks add (each round
 * trip there is tens of ms, so fewer of them matter more).
 *
 *   npx tsx bench/remote-persistent-shell.ts      # BENCH_ITERATIONS (default 200, at most 2000)
 */
import { createDaytonaProvider } from '../providers/daytona/index.js'
import { createE2BProvider } from '../providers/e2b/index.js'
import { resolveProfile } from '../src/sandbox/profiles.js'
import type { ExecRequest, Sandbox, SandboxProvider } from '../src/sandbox/types.js'
import { startFakeDaytona } from '../test/fakes/daytona/index.js'
import { startE2BEndpoint } from '../test/support/e2b-endpoint.js'
import { percentile } from './lib/percentile.js'

const iterations = Math.min(Math.max(Number(process.env.BENCH_ITERATIONS ?? 200) || 200, 10), 2000)
const warmup = 10

/** Times both paths `iterations` times, round robin; prints p50 / p99 and the ratio. */
async function sideBySide(name: string, sandbox: Sandbox): Promise<void> {
  const base: ExecRequest = { command: 'echo hi', timeoutMs: 10_000, outputCapBytes: 1 << 20 }
  const paths: [string, () => Promise<void>][] = [
    [
      `${name}: fresh \`echo hi\` (wrapper per command)`,
      async () => {
        const r = await sandbox.exec(base)
        if (r.stdout !== 'hi\n') throw new Error(`unexpected output ${JSON.stringify(r.stdout)}`)
      },
    ],
    [
      `${name}: persistent shell \`echo hi\``,
      async () => {
        const r = await sandbox.exec({ ...base, shell: 'persistent' })
        if (r.stdout !== 'hi\n' || r.shellRestarted) throw new Error(`unexpected result ${JSON.stringify(r)}`)
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
  const p50s = paths.map(([label], k) => {
    const p50 = percentile(samples[k]!, 50)
    console.log(
      `${label.padEnd(50)} n=${String(iterations).padStart(4)}  p50 ${p50.toFixed(2).padStart(7)} ms  p99 ${percentile(samples[k]!, 99).toFixed(2).padStart(7)} ms`,
    )
    return p50
  })
  console.log(`${name} p50 fresh/persistent: ${(p50s[0]! / p50s[1]!).toFixed(2)}x`)
}

async function withSandbox(
  provider: SandboxProvider,
  profile: Parameters<typeof resolveProfile>[1],
  fn: (sandbox: Sandbox) => Promise<void>,
): Promise<void> {
  const sandbox = await provider.create(resolveProfile('bench', profile), {
    labels: { 'sandbox-router.bench': 'remote-persistent-shell' },
  })
  try {
    await fn(sandbox)
  } finally {
    await sandbox.close()
    await provider.destroy(sandbox.ref)
    await provider.close?.()
  }
}

const daytona = await startFakeDaytona()
const e2b = await startE2BEndpoint({ tag: 'bench-rshell' })
try {
  await withSandbox(
    createDaytonaProvider({ apiKey: daytona.apiKey, apiUrl: daytona.apiUrl, eventStreaming: false }),
    { provider: 'daytona' },
    (sb) => sideBySide('daytona (fake)', sb),
  )
  await withSandbox(
    createE2BProvider({ apiKey: e2b.apiKey, apiUrl: e2b.apiUrl, sandboxUrl: e2b.sandboxUrl }),
    { provider: 'e2b' },
    (sb) => sideBySide('e2b (our endpoint)', sb),
  )
} finally {
  await daytona.close()
  await e2b.close()
}
