/**
 * A GET of a small page served by busybox httpd on port 8000 inside a `network: none` sandbox,
 * through the port URL of `sbx serve` (`/v1/sessions/{id}/ports/8000/…`: HTTP → service → agent
 * channel → 127.0.0.1:8000 in the sandbox), side by side with:
 *   - the same request over a port stream of the provider in this process (no service, no HTTP hop);
 *   - a `docker exec` of `wget` against the same server inside the container (the way to reach it
 *     without the channel; dockerode, one exec per request);
 *   - a GET of the same bytes from a plain Node HTTP server on the host (the floor of one HTTP hop).
 * Round robin, one process drives all paths. BENCH_ITERATIONS (default 300, at most 2000) samples per path.
 *
 *   npx tsx bench/port-request.ts            # needs the Docker engine (SBX_BASE_IMAGE names the image)
 */
import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import type { Duplex } from 'node:stream'
import { createDockerProvider } from '../providers/docker/index.js'
import { resolveProfile } from '../src/sandbox/profiles.js'
import { removeScope, startSbxServer, uniqueName } from '../test/support/sbx-cli.js'
import { percentile } from './lib/percentile.js'

const iterations = Math.min(Math.max(Number(process.env.BENCH_ITERATIONS ?? 300) || 300, 20), 2000)
const warmup = 20
const PAGE = 'hello from the sandbox\n'
const START_HTTPD =
  `mkdir -p /tmp/www && printf '${PAGE.replace('\n', '\\n')}' > /tmp/www/index.html && ` +
  '{ httpd -f -p 8000 -h /tmp/www </dev/null >/dev/null 2>&1 & } ; ' +
  'for i in $(seq 100); do netstat -ltn | grep -q ":8000 " && break; sleep 0.05; done'

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
      `${k.padEnd(52)} n=${String(s.length).padStart(4)}  p50 ${percentile(s, 50).toFixed(2).padStart(7)} ms  p99 ${percentile(s, 99).toFixed(2).padStart(7)} ms`,
    )
  }
  return p50s
}

const check = (body: string, path: string): void => {
  if (!body.endsWith(PAGE))
    throw new Error(`${path}: unexpected answer ${JSON.stringify(body.slice(0, 200))}`)
}

const scope = uniqueName('bench-ports')
const docker = createDockerProvider()
const box = await docker.create(resolveProfile('bench', { provider: 'docker' }), {
  labels: { 'sandbox-router.bench': 'port-request' },
})
const host = createServer((_req, res) => res.end(PAGE))
await new Promise<void>((resolve) => host.listen(0, '127.0.0.1', resolve))
const serve = await startSbxServer('serve', {
  config: { queue: { prefix: scope }, quotas: { requestsPerSecond: 100_000 } },
  env: { LOG_LEVEL: 'warn' },
})
try {
  await box.exec({ command: START_HTTPD, timeoutMs: 20_000, outputCapBytes: 1 << 16 })
  const created = await serve.post('/v1/sessions', { id: 'web', provider: 'docker', profile: 'default' })
  if (created.status !== 201) throw new Error(`session: ${created.status} ${await created.text()}`)
  const started = await serve.post('/v1/exec', {
    provider: 'docker',
    profile: 'default',
    sessionId: 'web',
    command: START_HTTPD,
  })
  const answer = (await started.json()) as { state?: string; result?: { exitCode: number | null } }
  if (answer.result?.exitCode !== 0) throw new Error(`httpd: ${started.status} ${JSON.stringify(answer)}`)

  const container = docker.docker.getContainer(box.ref.id)
  const viaDockerExec = async (): Promise<void> => {
    const exec = await container.exec({
      Cmd: ['wget', '-qO-', 'http://127.0.0.1:8000/index.html'],
      AttachStdout: true,
      AttachStderr: true,
    })
    const stream: Duplex = await exec.start({ hijack: true, stdin: false, Detach: false, Tty: false })
    let out = ''
    await new Promise<void>((resolve, reject) => {
      stream.on('data', (d: Buffer) => (out += d.toString('latin1')))
      stream.on('end', resolve)
      stream.on('error', reject)
    })
    check(out, 'docker exec wget')
  }
  const viaStream = async (): Promise<void> => {
    const s = await box.openPort!(8000)
    let out = ''
    s.on('data', (d: Buffer) => (out += d.toString()))
    const ended = new Promise<void>((resolve, reject) => {
      s.on('end', resolve)
      s.on('error', reject)
    })
    s.write('GET /index.html HTTP/1.0\r\nHost: localhost\r\n\r\n')
    await ended
    s.destroy()
    check(out, 'provider port stream')
  }
  const hostUrl = `http://127.0.0.1:${(host.address() as AddressInfo).port}/index.html`
  const viaHost = async (): Promise<void> => check(await (await fetch(hostUrl)).text(), 'host server')
  const viaService = async (): Promise<void> => {
    const res = await serve.fetch('/v1/sessions/web/ports/8000/index.html')
    check(await res.text(), 'sbx serve port URL')
  }

  const SERVICE = 'GET via sbx serve port URL (HTTP → channel)'
  const DOCKER = 'baseline: docker exec wget in the container'
  const HOST = 'baseline: GET from a host Node server'
  // Two rounds: a `docker exec` leaves the engine busy for a while, which would slow whichever sample
  // follows it, so the cheap paths are compared among themselves, then the service against it.
  console.log('-- the port URL against a host server and the raw stream')
  const a = await sideBySide({
    [SERVICE]: viaService,
    'raw port stream of the provider (no service)': viaStream,
    [HOST]: viaHost,
  })
  console.log(`${SERVICE} / ${HOST}: p50 ratio ${((a[SERVICE] ?? NaN) / (a[HOST] ?? NaN)).toFixed(3)}`)
  console.log('-- the port URL against docker exec wget')
  const b = await sideBySide({ [SERVICE]: viaService, [DOCKER]: viaDockerExec })
  console.log(`${SERVICE} / ${DOCKER}: p50 ratio ${((b[SERVICE] ?? NaN) / (b[DOCKER] ?? NaN)).toFixed(3)}`)
} finally {
  await serve.stop()
  await removeScope(scope)
  host.close()
  await docker.destroy(box.ref)
  await docker.close()
}
