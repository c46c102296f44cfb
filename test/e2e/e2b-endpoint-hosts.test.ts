import { execFile } from 'node:child_process'
import { mkdtempSync, symlinkSync, writeFileSync } from 'node:fs'
import { request } from 'node:http'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { promisify } from 'node:util'
import { Sandbox } from 'e2b'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { freePort } from '../support/redis-server.js'
import { e2bServe } from '../support/e2b-serve.js'
import { LineChild, removeScope, startSbxServer, uniqueName } from '../support/sbx-cli.js'
import type { SbxServer } from '../support/sbx-cli.js'

const run = promisify(execFile)
const KEY = `sbx_e2bhost_${'h'.repeat(24)}`

/** A GET to this server's port with `Host: host` (what a resolver for `*.localhost` would send). */
function getVia(port: number, host: string, path = '/', headers: Record<string, string> = {}) {
  return new Promise<{ status: number; body: string }>((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port, path, headers: { host, ...headers } }, (res) => {
      let body = ''
      res.setEncoding('utf8')
      res.on('data', (d: string) => (body += d))
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }))
    })
    req.on('error', reject)
    req.end()
  })
}

/**
 * `sandbox.getHost(port)` against `node bin/sbx.js serve`: `<port>-<sandboxId>.<domain>` names the
 * port in the sandbox on the endpoint's own listener (the domain defaults to `localhost:<port>`);
 * a gone sandbox and a closed port answer as E2B's proxy does; `allowPublicTraffic: false` needs the
 * traffic token.
 */
describe('E2B sandbox host names (getHost) through sbx serve', () => {
  const e2b = e2bServe('e2bhost')
  const { scope } = e2b
  let port: number

  beforeAll(async () => {
    await e2b.start({
      config: { quotas: { requestsPerSecond: 1000 } },
      env: { SBX_API_KEY: KEY },
      key: KEY,
    })
    port = e2b.port
  }, 180_000)

  afterAll(() => e2b.stop(), 120_000)

  test('a server in the sandbox answers at getHost(port); a closed port and a killed sandbox are 502s', async () => {
    const sbx = await Sandbox.create('base', { metadata: { suite: scope } })
    let killed = false
    try {
      const host = sbx.getHost(8000)
      expect(host).toBe(`8000-${sbx.sandboxId}.localhost:${port}`)
      await sbx.files.write('site/index.html', 'hello from the sandbox\n')
      const server = await sbx.commands.run('busybox httpd -f -p 8000 -h /home/user/site', {
        background: true,
      })
      await expect
        .poll(async () => (await getVia(port, host, '/index.html')).status, { timeout: 20_000 })
        .toBe(200)
      expect(await getVia(port, host, '/index.html')).toEqual({
        status: 200,
        body: 'hello from the sandbox\n',
      })
      // No key of ours goes with it: the name is the address, as on E2B.
      expect((await getVia(port, host.toUpperCase(), '/index.html')).status).toBe(200)

      const closed = await getVia(port, sbx.getHost(8001))
      expect(closed.status).toBe(502)
      expect(JSON.parse(closed.body)).toMatchObject({
        message: 'The sandbox is running but port is not open',
        sandboxId: sbx.sandboxId,
        port: 8001,
        code: 502,
      })
      await server.kill()

      await sbx.kill()
      killed = true
      const gone = await getVia(port, host)
      expect(gone.status).toBe(502)
      expect(JSON.parse(gone.body)).toEqual({
        message: 'The sandbox was not found',
        sandboxId: sbx.sandboxId,
        code: 502,
      })
    } finally {
      if (!killed) await sbx.kill()
    }
  }, 120_000)

  test('another domain, or a name that is not a sandbox, is the API as before', async () => {
    const other = await getVia(port, `8000-e2b-0123456789abcdef0123.example.com:${port}`, '/v1/sessions')
    expect(other.status).toBe(401)
    const api = await getVia(port, `127.0.0.1:${port}`, '/health')
    expect(api.status).not.toBe(502)
  })

  test('allowPublicTraffic: false: a port answers only with the traffic token create returned', async () => {
    const sbx = await Sandbox.create('base', {
      metadata: { suite: scope },
      network: { allowPublicTraffic: false },
    })
    try {
      expect(sbx.trafficAccessToken).toMatch(/^[0-9a-f]{48}$/)
      await sbx.files.write('site/index.html', 'private\n')
      await sbx.commands.run('busybox httpd -f -p 8000 -h /home/user/site', { background: true })
      const host = sbx.getHost(8000)
      const token = { 'e2b-traffic-access-token': sbx.trafficAccessToken ?? '' }
      await expect
        .poll(async () => (await getVia(port, host, '/index.html', token)).status, { timeout: 20_000 })
        .toBe(200)
      const refused = await getVia(port, host, '/index.html')
      expect(refused.status).toBe(403)
      expect(refused.body).toContain('e2b-traffic-access-token')
      expect((await getVia(port, host, '/index.html', { 'e2b-traffic-access-token': 'wrong' })).status).toBe(
        403,
      )
    } finally {
      await sbx.kill()
    }
  }, 120_000)
  test('the Host a port sees: the sandbox host name, or network.maskRequestHost with ${PORT}', async () => {
    const cgi = '#!/bin/sh\nprintf "Content-Type: text/plain\\r\\n\\r\\n%s" "$HTTP_HOST"\n'
    const serveHost = async (sbx: Sandbox): Promise<string> => {
      await sbx.files.write('site/cgi-bin/host', cgi)
      await sbx.commands.run('chmod +x site/cgi-bin/host')
      await sbx.commands.run('busybox httpd -f -p 8000 -h /home/user/site', { background: true })
      const host = sbx.getHost(8000)
      await expect
        .poll(async () => (await getVia(port, host, '/cgi-bin/host')).status, { timeout: 20_000 })
        .toBe(200)
      return (await getVia(port, host, '/cgi-bin/host')).body
    }
    const plain = await Sandbox.create('base', { metadata: { suite: scope } })
    const masked = await Sandbox.create('base', {
      metadata: { suite: scope },
      network: { maskRequestHost: 'custom-host.example.com:${PORT}' },
    })
    try {
      expect(await serveHost(plain)).toBe(plain.getHost(8000))
      expect(await serveHost(masked)).toBe('custom-host.example.com:8000')
      await expect(
        Sandbox.create('base', { network: { maskRequestHost: 'bad host\r\nX-Evil: 1' } }),
      ).rejects.toThrow(/maskRequestHost must be a host name/)
    } finally {
      await Promise.all([plain.kill(), masked.kill()])
    }
  }, 120_000)
})

/** An SDK app in a child process: node with the CA trusted and `*.localhost` resolved to loopback. */
const APP = `
import { Sandbox } from 'e2b'
const out = {}
const sbx = await Sandbox.create('base')
out.host = sbx.getHost(8000)
out.whoami = (await sbx.commands.run('whoami')).stdout.trim()
await sbx.files.write('site/index.html', 'over tls\\n')
await sbx.commands.run('busybox httpd -f -p 8000 -h /home/user/site', { background: true })
for (let i = 0; i < 100; i++) {
  const r = await fetch('https://' + out.host + '/index.html').catch((e) => ({ status: String(e.cause?.code ?? e) }))
  out.status = r.status
  if (r.status === 200) { out.body = await r.text(); break }
  await new Promise((res) => setTimeout(res, 200))
}
await sbx.kill()
const gone = await fetch('https://' + out.host + '/')
out.gone = { status: gone.status, body: await gone.json() }
console.log(JSON.stringify(out))
`
const RESOLVER = `
const dns = require('node:dns')
const lookup = dns.lookup
dns.lookup = function (host, options, callback) {
  if (typeof host !== 'string' || !/\\.localhost\\.?$/i.test(host)) return lookup.apply(this, arguments)
  const cb = typeof options === 'function' ? options : callback
  const all = typeof options === 'object' && options !== null && options.all
  process.nextTick(() => (all ? cb(null, [{ address: '127.0.0.1', family: 4 }]) : cb(null, '127.0.0.1', 4)))
  return {}
}
`

/**
 * `server.tls` with `e2b.domain`: the endpoint speaks HTTPS, and an SDK app given only
 * `E2B_API_URL` (no `E2B_SANDBOX_URL`) reaches envd at `49983-<id>.<domain>` and a server in the
 * sandbox at `https://<getHost(port)>`, as on E2B.
 */
describe('E2B endpoint over HTTPS with a sandbox domain (server.tls, e2b.domain)', () => {
  const scope = uniqueName('e2btls')
  const dir = mkdtempSync(join(tmpdir(), 'e2b-tls-'))
  let srv: SbxServer
  let port: number

  beforeAll(async () => {
    const ssl = (args: string[]) => run('openssl', args, { cwd: dir })
    await ssl([
      'req',
      '-x509',
      '-newkey',
      'rsa:2048',
      '-nodes',
      '-days',
      '1',
      '-subj',
      '/CN=e2b test CA',
      '-keyout',
      'ca.key',
      '-out',
      'ca.crt',
    ])
    await ssl([
      'req',
      '-newkey',
      'rsa:2048',
      '-nodes',
      '-subj',
      '/CN=e2b.localhost',
      '-keyout',
      'tls.key',
      '-out',
      'tls.csr',
    ])
    writeFileSync(join(dir, 'san.ext'), 'subjectAltName=DNS:*.e2b.localhost,DNS:e2b.localhost,IP:127.0.0.1\n')
    await ssl([
      'x509',
      '-req',
      '-in',
      'tls.csr',
      '-CA',
      'ca.crt',
      '-CAkey',
      'ca.key',
      '-CAcreateserial',
      '-days',
      '1',
      '-extfile',
      'san.ext',
      '-out',
      'tls.crt',
    ])
    port = await freePort()
    srv = await startSbxServer('serve', {
      port,
      config: {
        queue: { prefix: scope },
        quotas: { requestsPerSecond: 1000 },
        server: { tls: { certFile: join(dir, 'tls.crt'), keyFile: join(dir, 'tls.key') } },
        e2b: { templates: { base: 'e2b' }, domain: `e2b.localhost:${port}` },
      },
      env: { SBX_API_KEY: KEY },
    })
    expect(srv.child.lines.some((l) => l.text.includes(`listening on https://127.0.0.1:${port}`))).toBe(true)
  }, 180_000)

  afterAll(async () => {
    await srv?.stop()
    await removeScope(scope)
  }, 120_000)

  test('an SDK app with only E2B_API_URL: envd and getHost over https at <port>-<id>.e2b.localhost', async () => {
    writeFileSync(join(dir, 'app.mjs'), APP)
    writeFileSync(join(dir, 'resolver.cjs'), RESOLVER)
    // The app imports the installed SDK, as an app of its own would.
    symlinkSync(join(import.meta.dirname, '..', '..', 'node_modules'), join(dir, 'node_modules'))
    const child = LineChild.spawn(
      'e2b app',
      [join(dir, 'app.mjs')],
      {
        NODE_EXTRA_CA_CERTS: join(dir, 'ca.crt'),
        NODE_OPTIONS: `--require ${join(dir, 'resolver.cjs')}`,
        E2B_API_URL: `https://127.0.0.1:${port}`,
        E2B_API_KEY: KEY,
      },
      dir,
    )
    const line = await child.next((l) => l.stream === 'stdout' && l.text.startsWith('{'), 90_000)
    const out = JSON.parse(line.text) as Record<string, unknown>
    expect(out).toMatchObject({
      whoami: 'user',
      status: 200,
      body: 'over tls\n',
      gone: { status: 502, body: { message: 'The sandbox was not found', code: 502 } },
    })
    expect(out.host).toMatch(new RegExp(`^8000-e2b-[0-9a-f]{20}\\.e2b\\.localhost:${port}$`))
    await child.stop()
  }, 120_000)
})
