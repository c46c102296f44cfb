/*
 * `/mcp` at the HTTP level, through a real `node bin/sbx.js serve`: a forged Host or Origin (DNS
 * rebinding) is a 403 before anything else; a 401 carries `WWW-Authenticate: Bearer` and says whether
 * the key is missing or unknown, so MCP clients do not start an OAuth flow.
 */
import { request } from 'node:http'
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { removeScopeContainers, startSbxServer, uniqueName } from '../support/sbx-cli.js'
import type { SbxServer } from '../support/sbx-cli.js'

const INIT = JSON.stringify({
  jsonrpc: '2.0',
  id: 1,
  method: 'initialize',
  params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'raw', version: '1' } },
})

/** POST /mcp with exactly these headers (node:http: fetch cannot forge `Host`). */
function post(
  srv: SbxServer,
  headers: Record<string, string>,
): Promise<{ status: number; headers: Record<string, string | string[] | undefined>; body: string }> {
  const url = new URL(`${srv.url}/mcp`)
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: url.hostname,
        port: url.port,
        path: '/mcp',
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          accept: 'application/json, text/event-stream',
          ...headers,
        },
      },
      (res) => {
        let body = ''
        res.setEncoding('utf8')
        res.on('data', (c: string) => {
          body += c
          // An SSE answer stays open until the session ends: the first event is enough.
          if (body.includes('\n\n')) res.destroy()
        })
        res.on('close', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body }))
      },
    )
    req.on('error', reject)
    req.end(INIT)
  })
}

const scopes: string[] = []
const servers: SbxServer[] = []
let dflt: SbxServer

beforeAll(async () => {
  const scope = uniqueName('mcphttp')
  scopes.push(scope)
  dflt = await startSbxServer('serve', { config: { queue: { prefix: scope } } })
  servers.push(dflt)
}, 120_000)

afterAll(async () => {
  for (const s of servers) await s.stop()
  for (const scope of scopes) await removeScopeContainers(scope)
}, 60_000)

describe('/mcp Host and Origin (DNS rebinding)', () => {
  test('default: localhost names are accepted; a forged Host or Origin is a 403 naming the fix', async () => {
    const auth = { authorization: `Bearer ${dflt.key}` }
    const port = new URL(dflt.url).port
    for (const host of [`127.0.0.1:${port}`, `localhost:${port}`, `[::1]:${port}`]) {
      const ok = await post(dflt, { ...auth, host })
      expect(ok.status, host).toBe(200)
    }
    const ok = await post(dflt, { ...auth, host: `localhost:${port}`, origin: `http://localhost:5173` })
    expect(ok.status).toBe(200)

    const evilHost = await post(dflt, { ...auth, host: 'evil.example.com' })
    expect(evilHost.status).toBe(403)
    expect(JSON.parse(evilHost.body)).toEqual({
      error: { code: 'FORBIDDEN', message: expect.stringContaining('server.allowedHosts') as string },
    })
    expect(evilHost.body).toContain('evil.example.com')
    // Refused before authentication: a rebinding page has no key, and still learns nothing more.
    expect((await post(dflt, { host: 'evil.example.com' })).status).toBe(403)

    const evilOrigin = await post(dflt, {
      ...auth,
      host: `127.0.0.1:${port}`,
      origin: 'http://evil.example.com',
    })
    expect(evilOrigin.status).toBe(403)
    expect(evilOrigin.body).toContain('server.allowedOrigins')

    // The SDK client (Host 127.0.0.1:<port>, no Origin) works.
    const client = new Client({ name: 'e2e-mcp-http', version: '1.0.0' })
    await client.connect(
      new StreamableHTTPClientTransport(new URL(`${dflt.url}/mcp`), { requestInit: { headers: auth } }),
    )
    expect((await client.listTools()).tools.length).toBeGreaterThan(0)
    await client.close()
  }, 60_000)

  test('server.allowedHosts / allowedOrigins replace the defaults', async () => {
    const scope = uniqueName('mcphttpc')
    scopes.push(scope)
    const custom = await startSbxServer('serve', {
      config: {
        queue: { prefix: scope },
        server: { allowedHosts: ['sbx.example.test'], allowedOrigins: ['https://app.example.test'] },
      },
    })
    servers.push(custom)
    const auth = { authorization: `Bearer ${custom.key}` }
    expect((await post(custom, { ...auth, host: 'sbx.example.test:443' })).status).toBe(200)
    expect(
      (await post(custom, { ...auth, host: 'sbx.example.test', origin: 'https://app.example.test' })).status,
    ).toBe(200)
    expect((await post(custom, { ...auth, host: `127.0.0.1:${new URL(custom.url).port}` })).status).toBe(403)
    expect(
      (await post(custom, { ...auth, host: 'sbx.example.test', origin: 'https://sbx.example.test' })).status,
    ).toBe(403)
  }, 120_000)
})

describe('/mcp 401', () => {
  test('carries WWW-Authenticate: Bearer and says whether the key is missing or unknown', async () => {
    const host = `127.0.0.1:${new URL(dflt.url).port}`
    const missing = await post(dflt, { host })
    expect(missing.status).toBe(401)
    expect(missing.headers['www-authenticate']).toBe('Bearer realm="sandbox-router"')
    expect(missing.body).toContain('missing bearer token')

    const unknown = await post(dflt, { host, authorization: 'Bearer not-a-key-0123456789abcdef' })
    expect(unknown.status).toBe(401)
    expect(unknown.headers['www-authenticate']).toBe('Bearer realm="sandbox-router", error="invalid_token"')
    expect(unknown.body).toContain('unknown API key')

    // The SDK client without an auth provider reports the server's reason.
    const client = new Client({ name: 'e2e-mcp-401', version: '1.0.0' })
    const failed = await client
      .connect(
        new StreamableHTTPClientTransport(new URL(`${dflt.url}/mcp`), {
          requestInit: { headers: { authorization: 'Bearer not-a-key-0123456789abcdef' } },
        }),
      )
      .then(
        () => 'connected',
        (err: unknown) => String(err),
      )
    expect(failed).toContain('unknown API key')
  }, 60_000)
})
