/**
 * Routed warm command (`echo hi` in a bound session) into the Daytona and E2B providers — router →
 * queue → worker → session pool → adapter → SDK → HTTP → the local Daytona fake or our own E2B
 * endpoint (`sbx serve`), which run it in a Docker container — against their own handling time of
 * the same command (the fake's `/process/execute` for Daytona, the endpoint's `process.Process/Start`
 * for E2B as the tests' recording proxy times it). The difference is what routing through
 * sandbox-router costs on top of the provider. Paths are timed round robin in one process.
 *
 *   npx tsx bench/remote-routed.ts          # needs the Docker engine and Redis (REDIS_URL)
 */
import { createDaytonaProvider } from '../providers/daytona/index.js'
import { createE2BProvider } from '../providers/e2b/index.js'
import { startFakeDaytona } from '../test/fakes/daytona/index.js'
import { startE2BEndpoint } from '../test/support/e2b-endpoint.js'
import { createRoutedPath } from './lib/routed-path.js'
import type { RoutedPath } from './lib/routed-path.js'
import { percentile } from './lib/percentile.js'

const iterations = Math.min(Math.max(Number(process.env.BENCH_ITERATIONS ?? 150) || 150, 20), 1000)
const warmup = 10

const daytonaFake = await startFakeDaytona()
const e2bEndpoint = await startE2BEndpoint({ tag: 'bench-routed' })
const daytona = createDaytonaProvider({
  apiKey: daytonaFake.apiKey,
  apiUrl: daytonaFake.apiUrl,
  eventStreaming: false,
})
const e2b = createE2BProvider({
  apiKey: e2bEndpoint.apiKey,
  apiUrl: e2bEndpoint.apiUrl,
  sandboxUrl: e2bEndpoint.sandboxUrl,
})

/** The remote side's own time for every command it has handled so far, oldest first. */
const ownTimes = {
  daytona: (): number[] => daytonaFake.timings.get('POST /process/execute') ?? [],
  e2b: (): number[] =>
    e2bEndpoint.requests.filter((r) => r.path === '/process.Process/Start').map((r) => r.durationMs ?? NaN),
}

interface Measured {
  label: string
  provider: keyof typeof ownTimes
  path: RoutedPath
  client: number[]
  own: number[]
}

const paths: Measured[] = []
try {
  for (const provider of ['daytona', 'e2b'] as const) {
    const profile = provider === 'daytona' ? { provider, snapshot: 'bench' } : { provider, template: 'base' }
    const providers = [provider === 'daytona' ? daytona : e2b]
    for (const [queue, store] of [
      ['in-process', 'memory'],
      ['bullmq', 'redis'],
    ] as const) {
      const path = await createRoutedPath({ providers, profile, queue, store })
      paths.push({
        label: `${provider}, routed via ${queue} + ${store} store`,
        provider,
        path,
        client: [],
        own: [],
      })
    }
  }
  for (let i = 0; i < warmup; i++) for (const p of paths) await p.path.run('warm')
  for (let i = 0; i < iterations; i++) {
    for (const p of paths) {
      const before = ownTimes[p.provider]().length
      const t = performance.now()
      await p.path.run('warm')
      p.client.push(performance.now() - t)
      // Routed commands only: the one command this iteration sent to the remote side.
      const handled = ownTimes[p.provider]().slice(before)
      p.own.push(handled.reduce((a, b) => a + b, 0))
    }
  }
  const row = (label: string, s: number[]): void =>
    console.log(
      `${label.padEnd(58)} n=${String(s.length).padStart(4)}  p50 ${percentile(s, 50).toFixed(2).padStart(7)} ms  p99 ${percentile(s, 99).toFixed(2).padStart(7)} ms`,
    )
  for (const p of paths) {
    row(p.label, p.client)
    row(`  the remote side's own time for the command`, p.own)
    row(
      `  routing overhead (end to end − remote side)`,
      p.client.map((c, i) => c - (p.own[i] ?? NaN)),
    )
  }
} finally {
  for (const p of paths) await p.path.close()
  await daytona.close()
  await e2b.close()
  await daytonaFake.close()
  await e2bEndpoint.close()
}
