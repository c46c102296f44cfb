import { createHash } from 'node:crypto'
import { mkdtempSync, writeFileSync } from 'node:fs'
import { createServer, type Server } from 'node:https'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { createCa, createLeaf } from '../../src/egress/tls-ca.js'
import { removeScope, startSbxServer, uniqueName } from '../support/sbx-cli.js'
import type { SbxServer } from '../support/sbx-cli.js'

/**
 * Brokered credentials over HTTPS (`network.tlsIntercept`) through the real `sbx serve`: local
 * HTTPS servers whose certificates a CA of the test's own signs (configured as
 * `egress.upstreamCaFile`). From inside the sandbox (the dev image's curl), a bound destination gets
 * the secret put in by the proxy, behind a certificate of the sandbox's own CA; a destination no
 * secret is bound to is a plain tunnel (the server's own certificate); a bound server whose
 * certificate the service cannot verify is refused. The secret never shows inside the sandbox.
 */

const SECRET = `https-brokered-${Math.random().toString(36).slice(2)}`
const sha = (s: string): string => createHash('sha256').update(s).digest('hex')
const seen: { port: number; authorization: string | undefined }[] = []

/** An HTTPS server answering with a hash of the Authorization header it got (never the value). */
async function httpsServer(cert: {
  certPem: string
  keyPem: string
}): Promise<{ server: Server; port: number }> {
  const server = createServer({ cert: cert.certPem, key: cert.keyPem }, (req, res) => {
    const port = (server.address() as { port: number }).port
    seen.push({ port, authorization: req.headers.authorization })
    res.end(`auth sha256=${sha(req.headers.authorization ?? '')}\n`)
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()))
  return { server, port: (server.address() as { port: number }).port }
}

let bound: { server: Server; port: number }
let other: { server: Server; port: number }
let rogue: { server: Server; port: number }
let srv: SbxServer
const scope = uniqueName('egress-https')

interface ExecAnswer {
  result?: { exitCode: number; stdout: string; stderr: string }
  error?: { code: string; message: string }
}

async function exec(profile: string, command: string): Promise<{ exitCode: number; out: string }> {
  const res = await srv.post('/v1/exec', { provider: 'docker', profile, sessionId: `s-${profile}`, command })
  const body = (await res.json()) as ExecAnswer
  if (!body.result) throw new Error(`exec failed: ${JSON.stringify(body)}`)
  return { exitCode: body.result.exitCode, out: body.result.stdout + body.result.stderr }
}

beforeAll(async () => {
  const upstreamCa = await createCa('test-upstream')
  const unknownCa = await createCa('test-unknown')
  const dir = mkdtempSync(join(tmpdir(), 'sbx-egress-https-'))
  const caFile = join(dir, 'upstream-ca.pem')
  writeFileSync(caFile, upstreamCa.certPem)
  const leaf = await createLeaf(upstreamCa, 'localhost')
  ;[bound, other, rogue] = await Promise.all([
    httpsServer(leaf),
    httpsServer(leaf),
    httpsServer(await createLeaf(unknownCa, 'localhost')),
  ])
  const network = {
    allow: [`localhost:${bound.port}`, `localhost:${other.port}`, `localhost:${rogue.port}`],
    secrets: {
      API_TOKEN: {
        env: 'EGRESS_HTTPS_TOKEN',
        destinations: [`localhost:${bound.port}`, `localhost:${rogue.port}`],
      },
    },
    tlsIntercept: true,
  }
  srv = await startSbxServer('serve', {
    env: { EGRESS_HTTPS_TOKEN: SECRET, LOG_LEVEL: 'info' },
    config: {
      queue: { prefix: scope },
      egress: { upstreamCaFile: caFile },
      profiles: {
        'https-runc': { provider: 'docker', image: 'sandbox-router/dev:latest', network },
        'https-runsc': { provider: 'docker', image: 'sandbox-router/dev:latest', runtime: 'runsc', network },
      },
    },
  })
}, 180_000)

afterAll(async () => {
  await srv?.stop()
  await removeScope(scope)
  for (const s of [bound, other, rogue]) s?.server.close()
}, 120_000)

const curl = (port: number, flags = ''): string =>
  `curl -sS ${flags} -H "Authorization: Bearer $API_TOKEN" https://localhost:${port}/ 2>&1; echo "exit=$?"`

describe.each(['runc', 'runsc'])('brokered credentials over HTTPS (runtime %s)', (runtime) => {
  const profile = `https-${runtime}`

  test('a bound HTTPS destination gets the secret, behind a certificate of the sandbox CA', async () => {
    const r = await exec(profile, curl(bound.port, '-v'))
    expect(r.out).toContain(`auth sha256=${sha(`Bearer ${SECRET}`)}`)
    expect(r.out).toContain('exit=0')
    // the sandbox's CA is named for its egress folder (a UUID); the test's CA is 'test-upstream'
    expect(r.out).toMatch(/issuer: O ?= ?sandbox-router; CN ?= ?sbx egress CA [0-9a-f-]{36}/)
    expect(seen.filter((s) => s.port === bound.port).at(-1)?.authorization).toBe(`Bearer ${SECRET}`)
    expect(r.out).not.toContain(SECRET)
  }, 120_000)

  test('a destination no secret is bound to is a plain tunnel: its own certificate, the placeholder', async () => {
    // -k: the sandbox does not trust the test's upstream CA; the issuer shows whose certificate it is
    const r = await exec(profile, curl(other.port, '-v -k'))
    expect(r.out).toContain('exit=0')
    expect(r.out).toMatch(/issuer: O ?= ?sandbox-router; CN ?= ?sbx egress CA test-upstream/)
    expect(seen.filter((s) => s.port === other.port).at(-1)?.authorization).toBe(
      'Bearer sbx-brokered-secret:API_TOKEN',
    )
  }, 120_000)

  test('a bound server whose certificate the service cannot verify gets nothing: 502 with the reason', async () => {
    const before = seen.filter((s) => s.port === rogue.port).length
    const r = await exec(profile, curl(rogue.port, '-i'))
    expect(r.out).toContain('HTTP/1.1 502 Bad Gateway')
    expect(r.out).toMatch(/TLS to localhost:\d+ failed: .*(certificate|issuer)/i)
    expect(seen.filter((s) => s.port === rogue.port).length).toBe(before)
  }, 120_000)

  test('the sandbox holds the CA certificate but not its key, and never the secret', async () => {
    const r = await exec(
      profile,
      // (no ls: this gVisor release answers EINVAL to listing the bind mount; the names are tried)
      'for f in ca.crt ca-bundle.crt ca.key ca-key.pem; do test -r /run/sbx-egress/$f && echo has-$f; done; echo SSL_CERT_FILE=$SSL_CERT_FILE NODE_EXTRA_CA_CERTS=$NODE_EXTRA_CA_CERTS; ' +
        'echo keys=$(cat /run/sbx-egress/ca.crt /run/sbx-egress/ca-bundle.crt | grep -c "PRIVATE KEY"); ' +
        'env; cat /proc/*/environ /proc/*/cmdline 2>/dev/null | tr "\\0" "\\n"; ps aux',
    )
    expect(r.out).toContain('has-ca.crt\nhas-ca-bundle.crt\nSSL_CERT_FILE')
    expect(r.out).toContain(
      'SSL_CERT_FILE=/run/sbx-egress/ca-bundle.crt NODE_EXTRA_CA_CERTS=/run/sbx-egress/ca.crt',
    )
    expect(r.out).toContain('keys=0\n')
    expect(r.out).toContain('API_TOKEN=sbx-brokered-secret:API_TOKEN')
    expect(r.out).not.toContain(SECRET)
  }, 180_000)
})

describe('audit', () => {
  test('intercepted requests are audit lines naming the secret, never its value', async () => {
    const line = await srv.child.next(
      (l) =>
        l.json?.['msg'] === `egress allow localhost:${bound.port}` &&
        (l.json['egress'] as { intercepted?: boolean })?.intercepted === true,
      30_000,
    )
    expect(line.json?.['egress']).toMatchObject({
      reason: 'brokered secrets added (TLS intercepted)',
      secrets: ['API_TOKEN'],
      method: 'GET',
    })
    expect(srv.child.lines.some((l) => l.text.includes(SECRET))).toBe(false)
  }, 60_000)
})
