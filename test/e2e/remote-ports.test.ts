import { readFileSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import WebSocket from 'ws'
import { startFakeDaytona } from '../fakes/daytona/index.js'
import type { FakeDaytona } from '../fakes/daytona/index.js'
import { type E2BEndpoint, startE2BEndpoint } from '../support/e2b-endpoint.js'
import { removeScope, startSbxServer, uniqueName } from '../support/sbx-cli.js'
import type { SbxServer } from '../support/sbx-cli.js'

/**
 * Ports of remote sessions through `node bin/sbx.js serve`: `/v1/sessions/{id}/ports/{port}/…` on a
 * Daytona or E2B session goes through the provider's own preview proxy (here the Daytona fake's and
 * our own E2B endpoint's host names, driven by the real SDKs: Daytona's `getPreviewLink` URL and token, E2B's `<port>-<id>.<domain>` host and
 * traffic access token), while the caller only ever sees the service's tenant-authenticated URL.
 */

const KEY_A = `sbx_rports_a_${process.pid}`
const KEY_B = `sbx_rports_b_${process.pid}`

const fixture = (name: string): string =>
  readFileSync(fileURLToPath(new URL(`./fixtures/ports/${name}`, import.meta.url)), 'utf8')

interface Answer {
  result?: { exitCode: number | null; stdout: string; stderr: string }
  error?: { code: string; message: string }
}

const opened = (ws: WebSocket): Promise<void> =>
  new Promise((resolve, reject) => {
    ws.once('open', () => resolve())
    ws.once('error', reject)
  })
const refusedWith = (ws: WebSocket): Promise<number> =>
  new Promise((resolve, reject) => {
    ws.once('unexpected-response', (_req, res) => resolve(res.statusCode ?? 0))
    ws.once('open', () => reject(new Error('the WebSocket opened')))
  })

const scope = uniqueName('rports')
let daytona: FakeDaytona
let e2b: E2BEndpoint
let srv: SbxServer

beforeAll(async () => {
  ;[daytona, e2b] = await Promise.all([startFakeDaytona(), startE2BEndpoint()])
  srv = await startSbxServer('serve', {
    config: {
      queue: { prefix: scope },
      apiKeys: [
        { key: KEY_A, tenant: 'acme' },
        { key: KEY_B, tenant: 'globex' },
      ],
      profiles: {
        'remote-daytona': { provider: 'daytona', snapshot: 'sbx-test', defaultTimeoutMs: 20_000 },
        'remote-e2b': { provider: 'e2b', template: 'base', defaultTimeoutMs: 20_000 },
      },
      providers: { daytona: { agentBinaryPath: '/nonexistent/sbx-agent' } },
    },
    env: {
      SBX_API_KEY: KEY_A,
      DAYTONA_API_KEY: daytona.apiKey,
      DAYTONA_API_URL: daytona.apiUrl,
      E2B_API_KEY: e2b.apiKey,
      E2B_API_URL: e2b.apiUrl,
      E2B_SANDBOX_URL: e2b.sandboxUrl,
      SBX_E2B_PREVIEW_URL: e2b.previewUrl,
    },
  })
}, 180_000)

afterAll(async () => {
  await srv?.stop()
  await removeScope(scope)
  await Promise.all([daytona?.close(), e2b?.close()])
}, 120_000)

describe.each(['daytona', 'e2b'] as const)('ports of a %s session', (provider) => {
  const session = `web-${provider}`
  const exec = async (command: string): Promise<Answer> => {
    const res = await srv.post('/v1/exec', {
      provider,
      profile: `remote-${provider}`,
      sessionId: session,
      command,
    })
    expect(res.status).toBe(200)
    return (await res.json()) as Answer
  }
  const upload = async (path: string, body: string): Promise<void> => {
    const res = await srv.fetch(`/v1/sessions/${session}/files?path=${encodeURIComponent(path)}`, {
      method: 'PUT',
      body,
    })
    expect(res.status, await res.clone().text()).toBeLessThan(300)
  }

  beforeAll(async () => {
    const created = await srv.post('/v1/sessions', { id: session, provider, profile: `remote-${provider}` })
    expect(created.status, await created.clone().text()).toBe(201)
    await upload('/tmp/www/index.html', `hello from ${provider}\n`)
    await upload('/tmp/www/cgi-bin/echo', fixture('echo.cgi'))
    await upload('/tmp/ws-echo.sh', fixture('ws-echo.sh'))
    const started = await exec(
      'chmod +x /tmp/www/cgi-bin/echo /tmp/ws-echo.sh; ' +
        '{ setsid httpd -f -p 8000 -h /tmp/www </dev/null >/dev/null 2>&1 & } ; ' +
        '{ setsid nc -ll -p 9000 -e /tmp/ws-echo.sh </dev/null >/dev/null 2>&1 & } ; ' +
        'for i in $(seq 100); do n=$(netstat -ltn | grep -c -E ":(8000|9000) "); [ "$n" -ge 2 ] && break; sleep 0.05; done; ' +
        'netstat -ltn',
    )
    expect(started.result?.stdout).toMatch(/:8000 /)
    expect(started.result?.stdout).toMatch(/:9000 /)
  }, 120_000)

  test('GET and POST through the port URL reach busybox httpd in the remote sandbox', async () => {
    const res = await srv.fetch(`/v1/sessions/${session}/ports/8000/index.html`)
    expect(res.status).toBe(200)
    expect(await res.text()).toBe(`hello from ${provider}\n`)
    // Not public at the provider: the preview proxy wants the token only the service holds.
    if (provider === 'e2b')
      expect(
        e2b.requests.some(
          (r) =>
            r.path === '/v2/sandboxes' &&
            (r.body as { network?: { allowPublicTraffic?: boolean } } | undefined)?.network
              ?.allowPublicTraffic === false,
        ),
      ).toBe(true)
    else expect(daytona.sandboxes().every((s) => !s.public)).toBe(true)
    const posted = await srv.fetch(`/v1/sessions/${session}/ports/8000/cgi-bin/echo?x=1`, {
      method: 'POST',
      headers: { 'content-type': 'text/plain' },
      body: 'ping-body',
    })
    expect(posted.status).toBe(200)
    expect(await posted.text()).toBe('method=POST\nping-body')
  }, 60_000)

  test('a token header sent by the caller neither reaches the proxy nor shows in the answer', async () => {
    const res = await srv.fetch(`/v1/sessions/${session}/ports/8000/cgi-bin/echo`, {
      method: 'POST',
      body: 'x',
      headers: { 'x-daytona-preview-token': 'forged', 'e2b-traffic-access-token': 'forged' },
    })
    expect(res.status).toBe(200)
    expect([...res.headers.keys()].join(',')).not.toMatch(/daytona|e2b/i)
    expect(await res.text()).toBe('method=POST\nx')
  }, 60_000)

  test('a closed port answers 502 PORT_UNREACHABLE; another tenant gets 404', async () => {
    const res = await srv.fetch(`/v1/sessions/${session}/ports/8111/`)
    expect(res.status).toBe(502)
    const body = (await res.json()) as Answer
    expect(body.error?.code).toBe('PORT_UNREACHABLE')
    expect(body.error?.message).toContain('8111')
    const other = await srv.fetch(`/v1/sessions/${session}/ports/8000/index.html`, { key: KEY_B })
    expect(other.status).toBe(404)
    const ws = new WebSocket(`${srv.url.replace(/^http/, 'ws')}/v1/sessions/${session}/ports/9000/echo`, {
      headers: { authorization: `Bearer ${KEY_B}` },
    })
    expect(await refusedWith(ws)).toBe(404)
  }, 60_000)

  test('a WebSocket through the port URL reaches a WebSocket server in the remote sandbox', async () => {
    const ws = new WebSocket(`${srv.url.replace(/^http/, 'ws')}/v1/sessions/${session}/ports/9000/echo`, {
      headers: { authorization: `Bearer ${KEY_A}` },
    })
    const got = new Promise<string>((resolve) => ws.once('message', (d) => resolve(String(d))))
    await opened(ws)
    ws.send('hello-remote-ws')
    expect(await got).toBe('hello-remote-ws')
    const end = new Promise<number>((resolve) => ws.once('close', (code) => resolve(code)))
    ws.close(1000)
    expect(await end).toBe(1000)
  }, 60_000)
})
