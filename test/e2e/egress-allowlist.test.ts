import { createServer, type IncomingHttpHeaders, type Server } from 'node:http'
import { networkInterfaces } from 'node:os'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { removeScope, runSbx, configDir, startSbxServer, uniqueName } from '../support/sbx-cli.js'
import type { SbxServer } from '../support/sbx-cli.js'

/**
 * Egress allowlists and brokered credentials through the real `sbx serve`: only servers on this
 * machine (two HTTP servers on 127.0.0.1, and the host's own address for bypass attempts).
 */

const SECRET = `brokered-${Math.random().toString(36).slice(2)}-value`
const seen: IncomingHttpHeaders[] = []

function serve(body: string): Promise<{ server: Server; port: number }> {
  return new Promise((resolve) => {
    const server = createServer((req, res) => {
      seen.push(req.headers)
      res.end(body)
    })
    server.listen(0, '127.0.0.1', () => {
      const a = server.address()
      resolve({ server, port: typeof a === 'object' && a ? a.port : 0 })
    })
  })
}

const hostAddress = (): string =>
  Object.values(networkInterfaces())
    .flat()
    .find((i) => i && i.family === 'IPv4' && !i.internal)?.address ?? '192.0.2.2'

let allowed: { server: Server; port: number }
let denied: { server: Server; port: number }
let srv: SbxServer
const scope = uniqueName('egress')

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

/** A raw proxy request from inside the sandbox (bash's /dev/tcp): the proxy's whole answer. */
const rawProxy = (requestLine: string, host: string): string =>
  `exec 3<>/dev/tcp/127.0.0.1/3128 && printf '${requestLine}\\r\\nHost: ${host}\\r\\n\\r\\n' >&3 && cat <&3`

beforeAll(async () => {
  allowed = await serve('allowed-answer\n')
  denied = await serve('denied-answer\n')
  srv = await startSbxServer('serve', {
    env: { EGRESS_TEST_TOKEN: SECRET, LOG_LEVEL: 'info' },
    config: {
      queue: { prefix: scope },
      egress: {
        tenants: { default: { allow: [`localhost:${allowed.port}`, `127.0.0.1/32:${allowed.port}`] } },
      },
      profiles: {
        allowlist: {
          provider: 'docker',
          network: {
            allow: [`localhost:${allowed.port}`],
            secrets: { API_TOKEN: { env: 'EGRESS_TEST_TOKEN', destinations: [`localhost:${allowed.port}`] } },
          },
        },
        'allowlist-runsc': {
          provider: 'docker',
          runtime: 'runsc',
          network: {
            allow: [`localhost:${allowed.port}`],
            secrets: { API_TOKEN: { env: 'EGRESS_TEST_TOKEN', destinations: [`localhost:${allowed.port}`] } },
          },
        },
        // wider than the tenant's cap: the cap still decides
        wide: { provider: 'docker', network: { allow: ['localhost:*'] } },
      },
    },
  })
}, 180_000)

afterAll(async () => {
  await srv?.stop()
  await removeScope(scope)
  allowed?.server.close()
  denied?.server.close()
}, 120_000)

// The same allowlist, under both kernel boundaries (runsc: gVisor, with --host-uds=open).
describe.each([
  ['runc', 'allowlist'],
  ['runsc', 'allowlist-runsc'],
])('egress allowlist profiles (docker, runtime %s, through sbx serve)', (runtime, profile) => {
  test('the sandbox runs under the profile runtime', async () => {
    const r = await exec(profile, 'dmesg 2>/dev/null | head -n 1; true')
    if (runtime === 'runsc') expect(r.out).toContain('Starting gVisor')
    else expect(r.out).not.toContain('gVisor')
  }, 120_000)

  test('an allowed destination answers through the proxy, with the brokered secret put in by the proxy', async () => {
    const r = await exec(
      profile,
      `wget -q -O - --header "Authorization: Bearer $API_TOKEN" http://localhost:${allowed.port}/hello`,
    )
    expect(r).toEqual({ exitCode: 0, out: 'allowed-answer\n' })
    expect(seen.at(-1)?.['authorization']).toBe(`Bearer ${SECRET}`)
  }, 120_000)

  test('the sandbox holds only the placeholder: not in its env, files or process list', async () => {
    const r = await exec(
      profile,
      'env; cat /proc/*/environ /proc/*/cmdline 2>/dev/null | tr "\\0" "\\n"; grep -rs . /run/sbx-egress || true',
    )
    expect(r.out).toContain('API_TOKEN=sbx-brokered-secret:API_TOKEN')
    expect(r.out).not.toContain(SECRET)
  }, 120_000)

  test('a denied destination fails fast inside the sandbox with the rule that refused it', async () => {
    const started = Date.now()
    const r = await exec(
      profile,
      rawProxy(`GET http://localhost:${denied.port}/ HTTP/1.1`, `localhost:${denied.port}`),
    )
    expect(r.out).toContain('HTTP/1.1 403 Forbidden')
    expect(r.out).toContain(
      `sbx egress refused localhost:${denied.port}: localhost:${denied.port} matches no rule of the profile's network.allow (localhost:${allowed.port})`,
    )
    expect(Date.now() - started).toBeLessThan(5_000)
    const w = await exec(profile, `wget -q -O - http://localhost:${denied.port}/`)
    expect(w.exitCode).not.toBe(0)
    expect(w.out).toContain('403')
  }, 120_000)

  test('bypass attempts fail: raw IP, other port, CONNECT elsewhere, DNS to an outside resolver, UDP', async () => {
    const host = hostAddress()
    // the allowed server by its IP instead of its name: a name rule does not cover the address
    const ip = await exec(
      profile,
      rawProxy(`GET http://127.0.0.1:${allowed.port}/ HTTP/1.1`, `127.0.0.1:${allowed.port}`),
    )
    expect(ip.out).toContain('403 Forbidden')
    // straight to the host, no proxy: the sandbox has no network
    const direct = await exec(profile, `echo x > /dev/tcp/${host}/${allowed.port} && echo CONNECTED`)
    expect(direct.out).not.toContain('CONNECTED')
    expect(direct.exitCode).not.toBe(0)
    const tunnel = await exec(
      profile,
      rawProxy(`CONNECT localhost:${denied.port} HTTP/1.1`, `localhost:${denied.port}`),
    )
    expect(tunnel.out).toContain('403 Forbidden')
    expect(tunnel.out).not.toContain('denied-answer')
    const dns = await exec(profile, `nslookup example.com ${host}`)
    expect(dns.exitCode).not.toBe(0)
    const udp = await exec(profile, `echo x > /dev/udp/${host}/53 && echo SENT`)
    expect(udp.out).not.toContain('SENT')
    expect(denied.server.listenerCount('request')).toBe(1)
    expect(seen.every((h) => h.host !== `localhost:${denied.port}`)).toBe(true)
  }, 120_000)

  test('a killed forwarder comes back (the agent restarts it)', async () => {
    const r = await exec(
      profile,
      // the forwarder is --init's child with the same command line (the agent comes from the agent
      // volume, /.sbx-agent, or from an image built FROM the base); pid 1 itself stays
      'for p in /proc/[0-9]*; do [ "${p#/proc/}" != 1 ] && tr "\\0" " " < $p/cmdline 2>/dev/null | grep -qE "^(/usr/local/bin|/\\.sbx-agent)/sbx-agent --init" && kill ${p#/proc/} && echo KILLED; done; ' +
        `for i in $(seq 100); do wget -q -O - http://localhost:${allowed.port}/ 2>/dev/null && break; sleep 0.05; done`,
    )
    expect(r.out).toContain('KILLED')
    expect(r.out).toContain('allowed-answer')
  }, 120_000)

  test("a profile cannot widen its tenant's cap", async () => {
    const ok = await exec('wide', `wget -q -O - http://localhost:${allowed.port}/`)
    expect(ok.out).toBe('allowed-answer\n')
    const r = await exec(
      'wide',
      rawProxy(`GET http://localhost:${denied.port}/ HTTP/1.1`, `localhost:${denied.port}`),
    )
    expect(r.out).toContain("is allowed by profile rule 'localhost:*' but outside the tenant's egress cap")
  }, 120_000)

  test('every decision is an audit log line and a metric; the secret is in neither', async () => {
    const line = await srv.child.next(
      (l) =>
        l.json?.['msg'] === `egress deny localhost:${denied.port}` && typeof l.json['egress'] === 'object',
      30_000,
    )
    expect(line.json?.['egress']).toMatchObject({
      tenant: 'default',
      session: expect.any(String),
      destination: `localhost:${denied.port}`,
      verdict: 'deny',
    })
    expect(srv.child.lines.some((l) => l.text.includes(SECRET))).toBe(false)
    const metrics = await (await srv.fetch('/metrics')).text()
    expect(metrics).toMatch(/sbx_egress_decisions_total\{[^}]*verdict="deny"[^}]*\} [1-9]/)
    expect(metrics).toMatch(/sbx_egress_decisions_total\{[^}]*verdict="allow"[^}]*\} [1-9]/)
  }, 60_000)
})

describe('what each provider enforces', () => {
  test('sbx config check says how each allowlist profile is enforced', async () => {
    const cwd = configDir({
      profiles: { coder: { provider: 'docker', network: { allow: ['api.example.com'] } } },
    })
    const r = await runSbx(['config', 'check'], { cwd })
    expect(r.code).toBe(0)
    expect(r.stdout).toContain(
      "egress coder: allow: api.example.com (enforced by docker: the service's egress proxy)",
    )
  })

  test('/v1/providers reports the docker provider enforces allowlists and lists the profile policy', async () => {
    const body = (await (await srv.fetch('/v1/providers')).json()) as {
      providers: {
        id: string
        egress?: { allowlist: boolean }
        profiles: { name: string; network: string }[]
      }[]
    }
    const docker = body.providers.find((p) => p.id === 'docker')
    expect(docker?.egress).toMatchObject({ allowlist: true, refuses: [] })
    expect(docker?.profiles.find((p) => p.name === 'allowlist')?.network).toBe(
      `allow: localhost:${allowed.port}`,
    )
  })
})

describe('providers that cannot enforce an allowlist', () => {
  test('a daytona profile with network.allow is refused at start-up with the reason', async () => {
    const cwd = configDir({
      queue: { prefix: uniqueName('egress-daytona') },
      profiles: { remote: { provider: 'daytona', network: { allow: ['api.example.com'] } } },
    })
    const r = await runSbx(['serve', '--port', '0'], { cwd, timeoutMs: 60_000 })
    expect(r.code).not.toBe(0)
    expect(r.stderr).toContain("profile 'remote': network.allow cannot be enforced on provider 'daytona'")
    const check = await runSbx(['config', 'check'], { cwd })
    expect(check.code).not.toBe(0)
    expect(check.stderr).toContain("Daytona's networkAllowList takes IPv4 addresses and CIDRs only")
  }, 90_000)
})
