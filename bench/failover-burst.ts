/**
 * A burst of new sessions through the HTTP API of `sbx serve` while the primary provider (the local
 * Daytona fake) answers 429 to half of its creates: completion rate and time to first result, routed
 * straight to Daytona (the baseline: the pool retries each refused create with backoff) against the
 * failover policy `burst` (Daytona first, then Docker). Both runs use one `sbx serve` with the same
 * config, one after the other, each with half its creates refused.
 * BENCH_SESSIONS (default 40, at most 200) new sessions per run, all at once.
 *
 *   npx tsx bench/failover-burst.ts        # needs the Docker engine
 */
import { startFakeDaytona } from '../test/fakes/daytona/index.js'
import { removeScope, startSbxServer, uniqueName } from '../test/support/sbx-cli.js'
import { percentile } from './lib/percentile.js'

const sessions = Math.min(Math.max(Number(process.env.BENCH_SESSIONS ?? 40) || 40, 4), 200)

const scope = uniqueName('bench-failover')
const daytona = await startFakeDaytona()
const server = await startSbxServer('serve', {
  config: {
    queue: { prefix: scope },
    quotas: { maxSandboxes: 1_000, maxConcurrentJobs: 1_000, requestsPerSecond: 10_000 },
    profiles: { dt: { provider: 'daytona', snapshot: 'sbx-test', defaultTimeoutMs: 60_000 } },
    routing: {
      policies: {
        burst: {
          mode: 'failover',
          candidates: [
            { provider: 'daytona', profile: 'dt' },
            { provider: 'docker', profile: 'default' },
          ],
        },
      },
      circuit: { failureThreshold: 1_000, cooldownMs: 1_000 },
    },
  },
  env: { DAYTONA_API_KEY: daytona.apiKey, DAYTONA_API_URL: daytona.apiUrl },
})

async function burst(label: string, tag: string, provider: string, profile: string): Promise<void> {
  daytona.faults.rateLimitCreates(Math.floor(sessions / 2), 1)
  const t0 = performance.now()
  const results = await Promise.all(
    Array.from({ length: sessions }, async (_, i) => {
      const r = await server.post('/v1/exec', {
        provider,
        profile,
        sessionId: `${tag}-${i}`,
        command: 'echo ok',
      })
      const job = (await r.json()) as {
        state?: string
        result?: { route?: { providerId: string } }
        error?: unknown
      }
      if (job.state !== 'completed' && i === 0)
        console.log(`  first failure: ${r.status} ${JSON.stringify(job).slice(0, 300)}`)
      return {
        ok: job.state === 'completed',
        ms: performance.now() - t0,
        on: job.result?.route?.providerId ?? provider,
      }
    }),
  )
  const done = results.filter((r) => r.ok)
  const times = done.map((r) => r.ms)
  const where = Object.entries(
    done.reduce<Record<string, number>>((m, r) => ((m[r.on] = (m[r.on] ?? 0) + 1), m), {}),
  )
    .map(([k, v]) => `${k} ${v}`)
    .join(', ')
  console.log(
    `${label.padEnd(34)} completed ${String(done.length).padStart(3)}/${sessions}  ` +
      `p50 ${percentile(times, 50).toFixed(0).padStart(6)} ms  p99 ${percentile(times, 99).toFixed(0).padStart(6)} ms  (${where})`,
  )
  daytona.faults.rateLimitCreates(0)
}

try {
  console.log(`${sessions} new sessions at once, half of Daytona's creates answered 429`)
  await burst('baseline: straight to daytona', 'direct', 'daytona', 'dt')
  await burst('policy burst (daytona → docker)', 'policy', 'burst', 'auto')
} finally {
  await server.stop()
  await removeScope(scope)
  await daytona.close()
}
