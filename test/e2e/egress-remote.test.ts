import { createServer, type Server } from 'node:http'
import { networkInterfaces } from 'node:os'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { startFakeDaytona } from '../fakes/daytona/index.js'
import type { FakeDaytona } from '../fakes/daytona/index.js'
import { type E2BEndpoint, startE2BEndpoint } from '../support/e2b-endpoint.js'
import { configDir, removeScope, runSbx, startSbxServer, uniqueName } from '../support/sbx-cli.js'
import type { SbxServer } from '../support/sbx-cli.js'
import type { ConfigInput } from '../../src/config/schema.js'

/**
 * One egress policy, every provider: through the real `sbx serve`, a profile's `network` compiles to
 * Daytona's `networkBlockAll` / `networkAllowList` and E2B's `allowInternetAccess` /
 * `network.allowOut` / `denyOut`. The local Daytona fake receives those fields and enforces them
 * (block-all: a container without network; an allowlist: the project's egress proxy in front of a
 * container without network); our own E2B endpoint (the E2B side here) records what it was sent and
 * runs its template's profile, which has no network: it does not apply `allowOut` yet
 * (docs/e2b-endpoint.md), so E2B sandboxes here fail closed. A policy a provider cannot enforce is
 * refused at start-up with the reason.
 * Only servers on this machine: one on 127.0.0.1 (allowed), one on the host's own address (denied).
 */

const hostAddress = (): string =>
  Object.values(networkInterfaces())
    .flat()
    .find((i) => i && i.family === 'IPv4' && !i.internal)?.address ?? '192.0.2.2'

function serve(host: string, body: string): Promise<{ server: Server; port: number }> {
  return new Promise((resolve) => {
    const server = createServer((_req, res) => res.end(body))
    server.listen(0, host, () => {
      const a = server.address()
      resolve({ server, port: typeof a === 'object' && a ? a.port : 0 })
    })
  })
}

const scope = uniqueName('egress-remote')
let daytona: FakeDaytona
let e2b: E2BEndpoint
let allowed: { server: Server; port: number }
let denied: { server: Server; port: number }
let srv: SbxServer
let remoteEnv: Record<string, string>

interface ExecAnswer {
  result?: { exitCode: number; stdout: string; stderr: string; sandboxId: string }
  error?: { code: string; message: string }
}

async function exec(
  provider: 'daytona' | 'e2b',
  profile: string,
  command: string,
): Promise<{ exitCode: number; out: string; sandboxId: string }> {
  const res = await srv.post('/v1/exec', { provider, profile, sessionId: `s-${profile}`, command })
  const body = (await res.json()) as ExecAnswer
  if (!body.result) throw new Error(`exec failed: ${JSON.stringify(body)}`)
  return {
    exitCode: body.result.exitCode,
    out: body.result.stdout + body.result.stderr,
    sandboxId: body.result.sandboxId,
  }
}

beforeAll(async () => {
  ;[daytona, e2b, allowed, denied] = await Promise.all([
    startFakeDaytona(),
    startE2BEndpoint(),
    serve('127.0.0.1', 'allowed-answer\n'),
    serve(hostAddress(), 'denied-answer\n'),
  ])
  remoteEnv = {
    DAYTONA_API_KEY: daytona.apiKey,
    DAYTONA_API_URL: daytona.apiUrl,
    E2B_API_KEY: e2b.apiKey,
    E2B_API_URL: e2b.apiUrl,
    E2B_SANDBOX_URL: e2b.sandboxUrl,
  }
  srv = await startSbxServer('serve', {
    env: remoteEnv,
    config: {
      queue: { prefix: scope },
      providers: { daytona: { agentBinaryPath: '/nonexistent/sbx-agent' } },
      profiles: {
        'daytona-cidrs': { provider: 'daytona', snapshot: 'sbx-test', network: { allow: ['127.0.0.1'] } },
        'daytona-none': { provider: 'daytona', snapshot: 'sbx-test' },
        'e2b-rules': {
          provider: 'e2b',
          template: 'base',
          network: { allow: ['127.0.0.1/32', 'api.example.com', '*.pkg.example.org'] },
        },
        'e2b-none': { provider: 'e2b', template: 'base' },
      },
    },
  })
}, 180_000)

afterAll(async () => {
  await srv?.stop()
  await removeScope(scope)
  await Promise.all([daytona?.close(), e2b?.close()])
  allowed?.server.close()
  denied?.server.close()
}, 120_000)

// (busybox wget segfaults with -T behind a proxy, so no -T: a refusal comes back at once)
const fetchIn = (url: string): string => `wget -q -O - ${url} 2>&1; echo "exit=$?"`

describe('daytona: networkAllowList / networkBlockAll', () => {
  test('an allowlist of addresses becomes networkAllowList, and the fake enforces it', async () => {
    const ok = await exec('daytona', 'daytona-cidrs', fetchIn(`http://127.0.0.1:${allowed.port}/`))
    expect(ok.out).toContain('allowed-answer')
    const record = daytona.sandboxes().find((s) => s.id === ok.sandboxId)
    expect(record).toMatchObject({ networkBlockAll: false, networkAllowList: '127.0.0.1/32' })
    const no = await exec('daytona', 'daytona-cidrs', fetchIn(`http://${hostAddress()}:${denied.port}/`))
    expect(no.out).not.toContain('denied-answer')
    expect(no.out).not.toContain('exit=0')
  }, 120_000)

  test('network none becomes networkBlockAll: the sandbox reaches nothing', async () => {
    const r = await exec('daytona', 'daytona-none', fetchIn(`http://${hostAddress()}:${denied.port}/`))
    expect(r.out).not.toContain('denied-answer')
    expect(r.out).not.toContain('exit=0')
    const record = daytona.sandboxes().find((s) => s.id === r.sandboxId)
    expect(record?.networkBlockAll).toBe(true)
    expect(record?.networkAllowList).toBeUndefined()
  }, 120_000)
})

describe('e2b: allowInternetAccess / network.allowOut / denyOut', () => {
  test('rules become allowOut with all other traffic denied', async () => {
    const ok = await exec('e2b', 'e2b-rules', fetchIn(`http://127.0.0.1:${allowed.port}/`))
    expect(e2b.createBody(ok.sandboxId)).toMatchObject({
      allow_internet_access: false,
      network: {
        allowOut: ['127.0.0.1/32', 'api.example.com', '*.pkg.example.org'],
        denyOut: ['0.0.0.0/0'],
      },
    })
    const no = await exec('e2b', 'e2b-rules', fetchIn(`http://${hostAddress()}:${denied.port}/`))
    expect(no.out).not.toContain('denied-answer')
    expect(no.out).not.toContain('exit=0')
  }, 120_000)

  test('network none becomes allowInternetAccess: false without allowOut', async () => {
    const r = await exec('e2b', 'e2b-none', fetchIn(`http://${hostAddress()}:${denied.port}/`))
    expect(r.out).not.toContain('exit=0')
    const body = e2b.createBody(r.sandboxId)
    expect(body?.['allow_internet_access']).toBe(false)
    expect((body?.['network'] as { allowOut?: unknown } | undefined)?.allowOut).toBeUndefined()
  }, 120_000)
})

describe('what each provider enforces', () => {
  test('/v1/providers reports per provider the mechanism and the parts it enforces', async () => {
    const body = (await (await srv.fetch('/v1/providers')).json()) as {
      providers: { id: string; egress?: { mechanism: string; enforces: string[]; refuses: string[] } }[]
    }
    const by = (id: string) => body.providers.find((p) => p.id === id)?.egress
    expect(by('daytona')).toMatchObject({
      mechanism: 'networkBlockAll / networkAllowList',
      enforces: ['block-all', 'cidrs', 'tenant-caps'],
    })
    expect(by('daytona')?.refuses).toEqual(
      expect.arrayContaining(['hosts', 'wildcards', 'ports', 'brokered-secrets-http']),
    )
    expect(by('e2b')?.enforces).toEqual(['block-all', 'cidrs', 'hosts', 'wildcards', 'tenant-caps'])
    expect(by('e2b')?.refuses).toEqual(expect.arrayContaining(['ports', 'brokered-secrets-http']))
    expect(by('docker')?.refuses).toEqual([])
  })

  test('sbx config check shows the compiled fields of each remote profile', async () => {
    const cwd = configDir({
      profiles: {
        d: { provider: 'daytona', network: { allow: ['10.1.2.3/16', '192.168.0.7'] } },
        e: { provider: 'e2b', network: { allow: ['api.example.com', '10.0.0.0/8'] } },
      },
    })
    const r = await runSbx(['config', 'check'], { cwd, env: remoteEnv })
    expect(r.stderr).toBe('')
    expect(r.code).toBe(0)
    expect(r.stdout).toContain(
      "egress d: allow: 10.1.2.3/16, 192.168.0.7 (enforced by daytona: daytona's networkBlockAll: false; networkAllowList: 10.1.0.0/16,192.168.0.7/32)",
    )
    expect(r.stdout).toContain(
      "egress e: allow: api.example.com, 10.0.0.0/8 (enforced by e2b: e2b's allowInternetAccess: false; network.allowOut: api.example.com, 10.0.0.0/8; network.denyOut: 0.0.0.0/0)",
    )
  })
})

describe('a policy a provider cannot enforce is refused at start-up, never run weaker', () => {
  const refused: [string, { provider: string; network: unknown }, string][] = [
    [
      'a host name on daytona',
      { provider: 'daytona', network: { allow: ['api.example.com'] } },
      "Daytona's networkAllowList takes IPv4 addresses and CIDRs only, not host names, wildcards or IPv6 (rule 'api.example.com')",
    ],
    [
      'a port on daytona',
      { provider: 'daytona', network: { allow: ['10.0.0.0/8:443'] } },
      "Daytona's networkAllowList has no ports (rule '10.0.0.0/8:443')",
    ],
    [
      'six CIDRs on daytona',
      {
        provider: 'daytona',
        network: { allow: ['10.0.0.1', '10.0.0.2', '10.0.0.3', '10.0.0.4', '10.0.0.5', '10.0.0.6'] },
      },
      "Daytona's networkAllowList takes at most 5 CIDRs (the profile has 6)",
    ],
    [
      'a name with a port on e2b',
      { provider: 'e2b', network: { allow: ['git.example.com:22'] } },
      "E2B filters host names on HTTP and HTTPS (ports 80 and 443) only, so rule 'git.example.com:22' cannot be kept to its ports",
    ],
    [
      'a brokered secret on e2b',
      {
        provider: 'e2b',
        network: {
          allow: ['api.example.com'],
          secrets: { TOKEN: { env: 'X', destinations: ['api.example.com'] } },
        },
      },
      "brokered secrets (TOKEN) need the service's egress proxy, which E2B sandboxes do not go through",
    ],
  ]
  test.each(refused)('%s (sbx config check)', async (_what, profile, reason) => {
    const r = await runSbx(['config', 'check'], {
      cwd: configDir({ profiles: { remote: profile } as ConfigInput['profiles'] }),
    })
    expect(r.code).not.toBe(0)
    expect(r.stderr).toContain(
      `profile 'remote': network.allow cannot be enforced on provider '${profile.provider}': ${reason}`,
    )
  })

  test('a rule outside a tenant cap on a remote provider (sbx serve exits with the reason)', async () => {
    const cwd = configDir({
      queue: { prefix: uniqueName('egress-remote-cap') },
      egress: { tenants: { acme: { allow: ['10.0.0.0/8'] } } },
      profiles: {
        inside: { provider: 'e2b', network: { allow: ['10.1.0.0/16'] } },
        outside: { provider: 'e2b', network: { allow: ['10.1.0.0/16', '192.168.0.0/16'] } },
      },
    })
    const r = await runSbx(['serve', '--port', '0'], { cwd, env: remoteEnv, timeoutMs: 60_000 })
    expect(r.code).not.toBe(0)
    expect(r.stderr).toContain(
      "profile 'outside': network.allow cannot be enforced on provider 'e2b': rule '192.168.0.0/16' is not inside tenant 'acme''s egress cap (10.0.0.0/8), and e2b cannot apply a cap per sandbox",
    )
  }, 90_000)
})
