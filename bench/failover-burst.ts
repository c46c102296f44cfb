/**
 * The benchmark: a burst of new sessions through the HTTP API of `sbx serve` while the
 * primary provider (the local Daytona fake, which runs a container per sandbox) answers 429 to half
 * of its creates — completion rate and p50/p99 time to first result, routed straight to Daytona (the
 * baseline: the pool retries each refused create with backoff, up to 5 attempts) against the failover
 * policy `burst` (Daytona first, then Docker), side by side in one `sbx serve` with one config.
 *
 * Two ways of refusing half the creates, each run for both paths:
 *   first-half   the first N/2 creates of the burst are refused, then none (a short spike);
 *   every-other  every second create is refused for the whole burst, retries included (a steady 50 %).
 * Each session's time is from the burst's start to its result (`POST /v1/exec` of `echo ok`, its
 * first command). Between bursts the sessions are deleted, so each burst starts on an idle machine.
 *
 * BENCH_SESSIONS (default 100, 4–200) new sessions per burst, all at once;
 * BENCH_PATTERN `first-half`, `every-other` or `both` (default).
 *
 *   npx tsx bench/failover-burst.ts        # needs the Docker engine
 */
import { startFakeDaytona } from '../test/fakes/daytona/index.js'
import { removeScope, startSbxServer, uniqueName } from '../test/support/sbx-cli.js'
import type { SbxServer } from '../test/support/sbx-cli.js'
import { percentile } from './lib/percentile.js'

const sessions = Math.min(Math.max(Number(process.env.BENCH_SESSIONS ?? 100) || 100, 4), 200)
type Pattern = 'first-half' | 'every-other'
const patterns: Pattern[] =
  process.env.BENCH_PATTERN === 'first-half' || process.env.BENCH_PATTERN === 'every-other'
    ? [process.env.BENCH_PATTERN]
    : ['first-half', 'every-other']

const scope = uniqueName('bench-failover')
const daytona = await startFakeDaytona()
const server: SbxServer = await startSbxServer('serve', {
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
      // The circuit stays closed: what is measured is failing over per create, not skipping.
      circuit: { failureThreshold: 1_000, cooldownMs: 1_000 },
    },
  },
  env: { DAYTONA_API_KEY: daytona.apiKey, DAYTONA_API_URL: daytona.apiUrl },
})

interface Burst {
  completed: number
  p50: number
  p99: number
  where: string
  failures: string[]
}

function refuse(pattern: Pattern): void {
  if (pattern === 'first-half') daytona.faults.rateLimitCreates(Math.floor(sessions / 2), 1)
  else daytona.faults.rateLimitShare(0.5, 1)
}

function healthy(): void {
  daytona.faults.rateLimitCreates(0)
  daytona.faults.rateLimitShare(0)
}

async function burst(tag: string, provider: string, profile: string, pattern: Pattern): Promise<Burst> {
  refuse(pattern)
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
        result?: { stdout?: string; route?: { providerId: string } }
        error?: { code?: string; message?: string }
      }
      return {
        ok: job.state === 'completed' && job.result?.stdout === 'ok\n',
        ms: performance.now() - t0,
        on: job.result?.route?.providerId ?? provider,
        why: `${r.status} ${job.error?.code ?? job.state ?? ''}`,
      }
    }),
  )
  healthy()
  const done = results.filter((r) => r.ok)
  const times = done.map((r) => r.ms)
  const where = Object.entries(
    done.reduce<Record<string, number>>((m, r) => ((m[r.on] = (m[r.on] ?? 0) + 1), m), {}),
  )
    .map(([k, v]) => `${k} ${v}`)
    .join(', ')
  const failures = results.filter((r) => !r.ok).map((r) => r.why)
  // Free the machine for the next burst.
  for (let i = 0; i < sessions; i += 20)
    await Promise.all(
      Array.from({ length: Math.min(20, sessions - i) }, (_, k) =>
        server.fetch(`/v1/sessions/${tag}-${i + k}`, { method: 'DELETE' }).then((r) => r.body?.cancel()),
      ),
    )
  return { completed: done.length, p50: percentile(times, 50), p99: percentile(times, 99), where, failures }
}

const row = (label: string, b: Burst): string =>
  `  ${label.padEnd(34)} completed ${String(b.completed).padStart(3)}/${sessions}  ` +
  `p50 ${b.p50.toFixed(0).padStart(6)} ms  p99 ${b.p99.toFixed(0).padStart(6)} ms  (${b.where || 'none'})` +
  (b.failures.length ? `  failures: ${[...new Set(b.failures)].join(', ')}` : '')

try {
  console.log(
    `${sessions} new sessions at once through sbx serve's HTTP API; Daytona refuses half its creates`,
  )
  for (const pattern of patterns) {
    console.log(`pattern ${pattern}:`)
    const base = await burst(`direct-${pattern}`, 'daytona', 'dt', pattern)
    console.log(row('baseline: straight to daytona', base))
    const pol = await burst(`policy-${pattern}`, 'burst', 'auto', pattern)
    console.log(row('policy burst (daytona → docker)', pol))
    console.log(
      `  policy / baseline: completion ${(pol.completed / Math.max(base.completed, 1)).toFixed(2)}, ` +
        `p50 ${(pol.p50 / base.p50).toFixed(2)}, p99 ${(pol.p99 / base.p99).toFixed(2)}`,
    )
  }
} finally {
  await server.stop()
  await removeScope(scope)
  await daytona.close()
}
