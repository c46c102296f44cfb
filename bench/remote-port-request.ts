/**
 * A GET of a small page served by busybox httpd on port 8000 through the port URL of `sbx serve`
 * (`/v1/sessions/{id}/ports/8000/…`) for a Docker session (the baseline: agent channel) and for
 * Daytona and E2B sessions (the Daytona fake's preview proxy, our own E2B endpoint's host names:
 * service → preview proxy → sandbox),
 * side by side in one process, round robin. BENCH_ITERATIONS (default 200, at most 2000) samples.
 *
 *   npx tsx bench/remote-port-request.ts     # needs the Docker engine and Redis
 */
import { startFakeDaytona } from '../test/fakes/daytona/index.js'
import { startE2BEndpoint } from '../test/support/e2b-endpoint.js'
import { removeScope, startSbxServer, uniqueName } from '../test/support/sbx-cli.js'
import { percentile } from './lib/percentile.js'

const iterations = Math.min(Math.max(Number(process.env.BENCH_ITERATIONS ?? 200) || 200, 20), 2000)
const warmup = 20
/** Docker's exec keeps a plain background job; the remote wrappers end the command's process group. */
const startHttpd = (setsid: boolean): string =>
  "mkdir -p /tmp/www && printf 'hello\\n' > /tmp/www/index.html && " +
  `{ ${setsid ? 'setsid ' : ''}httpd -f -p 8000 -h /tmp/www </dev/null >/dev/null 2>&1 & } ; ` +
  'for i in $(seq 100); do netstat -ltn | grep -q ":8000 " && break; sleep 0.05; done'

async function main(): Promise<void> {
  const scope = uniqueName('bench-rports')
  const [daytona, e2b] = await Promise.all([startFakeDaytona(), startE2BEndpoint({ tag: 'bench-rports' })])
  const srv = await startSbxServer('serve', {
    config: {
      queue: { prefix: scope },
      profiles: {
        default: { provider: 'docker' },
        'remote-daytona': { provider: 'daytona', snapshot: 'sbx-test' },
        'remote-e2b': { provider: 'e2b', template: 'base' },
      },
      providers: { daytona: { agentBinaryPath: '/nonexistent/sbx-agent' } },
    },
    env: {
      DAYTONA_API_KEY: daytona.apiKey,
      DAYTONA_API_URL: daytona.apiUrl,
      E2B_API_KEY: e2b.apiKey,
      E2B_API_URL: e2b.apiUrl,
      E2B_SANDBOX_URL: e2b.sandboxUrl,
      SBX_E2B_PREVIEW_URL: e2b.previewUrl,
    },
  })
  try {
    const sessions = { docker: 'default', daytona: 'remote-daytona', e2b: 'remote-e2b' } as const
    for (const [provider, profile] of Object.entries(sessions)) {
      const id = `b-${provider}`
      if ((await srv.post('/v1/sessions', { id, provider, profile })).status !== 201)
        throw new Error(provider)
      const started = await srv.post('/v1/exec', {
        provider,
        profile,
        sessionId: id,
        command: startHttpd(provider !== 'docker'),
      })
      const answer = (await started.json()) as { result?: { exitCode: number } }
      if (answer.result?.exitCode !== 0)
        throw new Error(`httpd did not start on ${provider}: ${JSON.stringify(answer)}`)
    }
    const paths: Record<string, () => Promise<void>> = {}
    for (const provider of Object.keys(sessions)) {
      paths[`port URL (${provider})`] = async () => {
        const r = await srv.fetch(`/v1/sessions/b-${provider}/ports/8000/index.html`)
        const body = await r.text()
        if (body !== 'hello\n')
          throw new Error(`bad answer via ${provider}: ${r.status} ${body.slice(0, 200)}`)
      }
    }
    const entries = Object.entries(paths)
    for (let i = 0; i < warmup; i++) for (const [, fn] of entries) await fn()
    const samples = new Map<string, number[]>(entries.map(([k]) => [k, []]))
    for (let i = 0; i < iterations; i++)
      for (const [k, fn] of entries) {
        const t = performance.now()
        await fn()
        samples.get(k)?.push(performance.now() - t)
      }
    const base = percentile(samples.get('port URL (docker)') ?? [], 50)
    console.log(`${iterations} samples per path, round robin`)
    for (const [k, s] of samples)
      console.log(
        `${k.padEnd(22)} p50 ${percentile(s, 50).toFixed(2)} ms  p95 ${percentile(s, 95).toFixed(2)} ms  ` +
          `p50 ratio vs docker ${(percentile(s, 50) / base).toFixed(3)}`,
      )
  } finally {
    await srv.stop()
    await removeScope(scope)
    await Promise.all([daytona.close(), e2b.close()])
  }
}

await main()
