/**
 * The cost of TLS interception (`network.tlsIntercept`): HTTPS GETs by curl inside one sandbox (the
 * dev image) to two HTTPS servers on the host with the same certificate, side by side:
 *   - `intercepted`: a destination a brokered secret is bound to (the proxy terminates TLS with a
 *     leaf of the sandbox's CA, puts the secret in, and opens a new verified TLS connection);
 *   - `tunnel`: a destination without a secret (a plain CONNECT tunnel, TLS end to end).
 * Each sample is one command of BENCH_BATCH (default 20) curls, timed by the agent (durationMs);
 * the rounds alternate the two, in one process. BENCH_ROUNDS (default 20). Also printed: the
 * openssl cost of a sandbox CA (at create) and of one leaf (first request to a host).
 *
 *   npx tsx bench/egress-https.ts     # needs the Docker engine, openssl and sandbox-router/dev:latest
 */
import { createServer } from 'node:https'
import type { AddressInfo } from 'node:net'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { createDockerProvider } from '../providers/docker/index.js'
import { EgressProxy } from '../src/egress/proxy.js'
import { createCa, createLeaf } from '../src/egress/tls-ca.js'
import { resolveProfile } from '../src/sandbox/profiles.js'
import { percentile } from './lib/percentile.js'

const rounds = Math.min(Math.max(Number(process.env.BENCH_ROUNDS ?? 20) || 20, 5), 500)
const batch = Math.min(Math.max(Number(process.env.BENCH_BATCH ?? 20) || 20, 1), 200)
const PAGE = 'hello over tls\n'

const timed = async <T>(fn: () => Promise<T>): Promise<[T, number]> => {
  const t = performance.now()
  const v = await fn()
  return [v, performance.now() - t]
}
const [ca, caMs] = await timed(() => createCa('bench-upstream'))
const [leaf, leafMs] = await timed(() => createLeaf(ca, 'localhost'))
const dir = mkdtempSync(join(tmpdir(), 'sbx-bench-egress-https-'))
const caFile = join(dir, 'ca.pem')
writeFileSync(caFile, ca.certPem)
const listen = async (): Promise<number> => {
  const server = createServer({ cert: leaf.certPem, key: leaf.keyPem }, (_req, res) => res.end(PAGE))
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  servers.push(server)
  return (server.address() as AddressInfo).port
}
const servers: ReturnType<typeof createServer>[] = []
const [bound, plain] = [await listen(), await listen()]
let decisions = 0
const proxy = new EgressProxy({
  upstreamCaFile: caFile,
  env: { BENCH_TOKEN: 't' },
  onAudit: () => void decisions++,
})
const docker = createDockerProvider({ egress: { proxy, socketDir: join(dir, 's') } })
const [box, createMs] = await timed(() =>
  docker.create(
    resolveProfile('bench-https', {
      provider: 'docker',
      image: 'sandbox-router/dev:latest',
      network: {
        allow: [`localhost:${bound}`, `localhost:${plain}`],
        secrets: { TOKEN: { env: 'BENCH_TOKEN', destinations: [`localhost:${bound}`] } },
        tlsIntercept: true,
      },
    }),
    { labels: { 'sandbox-router.bench': 'egress-https' } },
  ),
)
try {
  const loop = (port: number): string =>
    `for i in $(seq ${batch}); do curl -sfk -H "Authorization: Bearer $TOKEN" https://localhost:${port}/ >/dev/null || exit 7; done; curl -sfk https://localhost:${port}/`
  const paths = {
    [`intercepted https://localhost:${bound}/`]: () =>
      box.exec({ command: loop(bound), timeoutMs: 120_000, outputCapBytes: 4096 }),
    [`tunnel      https://localhost:${plain}/`]: () =>
      box.exec({ command: loop(plain), timeoutMs: 120_000, outputCapBytes: 4096 }),
  }
  const samples = new Map<string, number[]>(Object.keys(paths).map((k) => [k, []]))
  for (let r = -2; r < rounds; r++)
    for (const [k, fn] of Object.entries(paths)) {
      const res = await fn()
      if (res.exitCode !== 0 || res.stdout !== PAGE)
        throw new Error(`${k}: exit ${res.exitCode} ${JSON.stringify(res.stdout + res.stderr).slice(0, 300)}`)
      if (r >= 0) samples.get(k)?.push(res.durationMs / (batch + 1))
    }
  console.log(
    `egress-https: ${rounds} rounds x ${batch + 1} curls per path (ms per GET, curl process included)`,
  )
  const p50: number[] = []
  for (const [k, s] of samples) {
    p50.push(percentile(s, 50))
    console.log(
      `${k.padEnd(44)} p50 ${percentile(s, 50).toFixed(2).padStart(7)} ms  p90 ${percentile(s, 90).toFixed(2).padStart(7)} ms`,
    )
  }
  const [intercepted = NaN, tunnel = NaN] = p50
  console.log(
    `intercepted / tunnel (p50): ${(intercepted / tunnel).toFixed(2)}x, +${(intercepted - tunnel).toFixed(2)} ms per GET; decisions: ${decisions}`,
  )
  console.log(
    `openssl: a CA ${caMs.toFixed(0)} ms, a leaf ${leafMs.toFixed(0)} ms; create of the intercepting sandbox ${createMs.toFixed(0)} ms`,
  )
} finally {
  await docker.destroy(box.ref)
  await docker.close()
  await proxy.closeAll()
  for (const s of servers) s.close()
  rmSync(dir, { recursive: true, force: true })
}
