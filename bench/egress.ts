/**
 * The egress proxy's cost: GETs of a small page from a Node HTTP server on the host, run inside a
 * sandbox by busybox `wget`, side by side:
 *   - `allowlist`: a `network: { allow }` sandbox (no network; 127.0.0.1:3128 → agent forwarder →
 *     Unix socket → the service's egress proxy, which checks the rule, dials and relays);
 *   - `bridge`: a `network: bridge` sandbox fetching the same server directly at the bridge gateway.
 * Each sample is one command of BENCH_BATCH (default 20) GETs in a loop, timed by the agent
 * (durationMs); the rounds alternate the two sandboxes, in one process. BENCH_ROUNDS (default 30).
 *
 *   npx tsx bench/egress.ts           # needs the Docker engine (SBX_BASE_IMAGE names the image)
 */
import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { createDockerProvider } from '../providers/docker/index.js'
import { EgressProxy } from '../src/egress/proxy.js'
import { resolveProfile } from '../src/sandbox/profiles.js'
import { percentile } from './lib/percentile.js'

const rounds = Math.min(Math.max(Number(process.env.BENCH_ROUNDS ?? 30) || 30, 5), 500)
const batch = Math.min(Math.max(Number(process.env.BENCH_BATCH ?? 20) || 20, 1), 200)
const PAGE = 'hello from the host\n'

const server = createServer((_req, res) => res.end(PAGE))
await new Promise<void>((resolve) => server.listen(0, '0.0.0.0', resolve))
const port = (server.address() as AddressInfo).port
const socketDir = mkdtempSync(join(tmpdir(), 'sbx-bench-egress-'))
let decisions = 0
const proxy = new EgressProxy({ onAudit: () => void decisions++ })
const docker = createDockerProvider({ egress: { proxy, socketDir } })
const labels = { 'sandbox-router.bench': 'egress' }
const allowBox = await docker.create(
  resolveProfile('bench-allow', { provider: 'docker', network: { allow: [`localhost:${port}`] } }),
  { labels },
)
const bridgeBox = await docker.create(
  resolveProfile('bench-bridge', { provider: 'docker', network: 'bridge' }),
  {
    labels,
  },
)
try {
  const inspect = await docker.docker.getContainer(bridgeBox.ref.id).inspect()
  const gateway = inspect.NetworkSettings.Networks['bridge']?.Gateway ?? '172.17.0.1'
  const loop = (url: string): string =>
    `for i in $(seq ${batch}); do wget -q -O - ${url} >/dev/null || exit 7; done; wget -q -O - ${url}`
  const paths = {
    [`allowlist (proxy) GET http://localhost:${port}/`]: () =>
      allowBox.exec({ command: loop(`http://localhost:${port}/`), timeoutMs: 120_000, outputCapBytes: 4096 }),
    [`bridge (direct) GET http://${gateway}:${port}/`]: () =>
      bridgeBox.exec({
        command: loop(`http://${gateway}:${port}/`),
        timeoutMs: 120_000,
        outputCapBytes: 4096,
      }),
  }
  const samples = new Map<string, number[]>(Object.keys(paths).map((k) => [k, []]))
  for (let r = -2; r < rounds; r++)
    for (const [k, fn] of Object.entries(paths)) {
      const res = await fn()
      if (res.exitCode !== 0 || res.stdout !== PAGE)
        throw new Error(`${k}: exit ${res.exitCode} ${JSON.stringify(res.stdout + res.stderr).slice(0, 300)}`)
      if (r >= 0) samples.get(k)?.push(res.durationMs / (batch + 1))
    }
  const p50: number[] = []
  console.log(`egress: ${rounds} rounds x ${batch + 1} GETs per path (ms per GET, wget process included)`)
  for (const [k, s] of samples) {
    p50.push(percentile(s, 50))
    console.log(
      `${k.padEnd(48)} p50 ${percentile(s, 50).toFixed(2).padStart(7)} ms  p90 ${percentile(s, 90).toFixed(2).padStart(7)} ms`,
    )
  }
  const [viaProxy = NaN, direct = NaN] = p50
  console.log(
    `proxy / direct (p50): ${(viaProxy / direct).toFixed(2)}x, +${(viaProxy - direct).toFixed(2)} ms per GET; proxy decisions: ${decisions}`,
  )
} finally {
  await docker.destroy(allowBox.ref)
  await docker.destroy(bridgeBox.ref)
  await docker.close()
  await proxy.closeAll()
  server.close()
  rmSync(socketDir, { recursive: true, force: true })
}
