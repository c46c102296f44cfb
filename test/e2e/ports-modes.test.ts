import { afterAll, describe, expect, test } from 'vitest'
import WebSocket from 'ws'
import { type E2BEndpoint, startE2BEndpoint } from '../support/e2b-endpoint.js'
import { fleetConfig, removeScope, startSbxServer, uniqueName } from '../support/sbx-cli.js'
import type { SbxServer } from '../support/sbx-cli.js'
import { closed, collect, opened } from '../support/terminal-socket.js'

/**
 * Ports in the other ways the service runs. `sbx serve` of a fleet (`--redis`: Redis session store,
 * BullMQ) forwards like the embedded one. A session on the E2B provider (here our own E2B endpoint
 * on Docker) has a terminal on E2B's PTYs; its ports go through E2B's preview hosts (see
 * remote-ports.test.ts). Where ports and terminals are not offered, the answer says so
 * (501 UNSUPPORTED) and what to do: `sbx api` of a fleet, whose process holds no sandbox channel.
 */

interface ErrorAnswer {
  error?: { code: string; message: string }
}

const refusedWith = (ws: WebSocket): Promise<number> =>
  new Promise((resolve, reject) => {
    ws.once('unexpected-response', (_req, res) => resolve(res.statusCode ?? 0))
    ws.once('open', () => reject(new Error('the WebSocket opened')))
  })

const stops: (() => Promise<void>)[] = []
afterAll(async () => {
  for (const stop of stops.reverse()) await stop()
}, 120_000)

describe('ports and terminals in fleet mode, on E2B, and where they are not offered', () => {
  test('sbx serve in fleet mode (Redis) forwards a port too', async () => {
    const scope = uniqueName('ports-fleet')
    const srv = await startSbxServer('serve', { config: fleetConfig(scope) })
    stops.push(async () => {
      await srv.stop()
      await removeScope(scope)
    })
    expect(
      (await srv.post('/v1/sessions', { id: 'web', provider: 'docker', profile: 'default' })).status,
    ).toBe(201)
    const started = await srv.post('/v1/exec', {
      provider: 'docker',
      profile: 'default',
      sessionId: 'web',
      command:
        'mkdir -p /tmp/www; echo fleet-page > /tmp/www/index.html; ' +
        '{ httpd -f -p 8000 -h /tmp/www </dev/null >/dev/null 2>&1 & } ; ' +
        'for i in $(seq 100); do netstat -ltn | grep -q ":8000 " && break; sleep 0.05; done',
    })
    expect(((await started.json()) as { result?: { exitCode: number } }).result?.exitCode).toBe(0)
    const res = await srv.fetch('/v1/sessions/web/ports/8000/index.html')
    expect(res.status).toBe(200)
    expect(await res.text()).toBe('fleet-page\n')
  }, 180_000)

  test('a session on the E2B provider: a terminal on E2B’s PTY (type, resize, exit); a closed port is 502', async () => {
    const scope = uniqueName('ports-e2b')
    const e2b: E2BEndpoint = await startE2BEndpoint()
    stops.push(async () => void (await e2b.close()))
    const srv: SbxServer = await startSbxServer('serve', {
      config: {
        queue: { prefix: scope },
        profiles: { remote: { provider: 'e2b', template: 'base' } },
      },
      env: {
        E2B_API_KEY: e2b.apiKey,
        E2B_API_URL: e2b.apiUrl,
        E2B_SANDBOX_URL: e2b.sandboxUrl,
        SBX_E2B_PREVIEW_URL: e2b.previewUrl,
      },
    })
    stops.push(async () => {
      await srv.stop()
      await removeScope(scope)
    })
    expect(
      (await srv.post('/v1/sessions', { id: 'remote-1', provider: 'e2b', profile: 'remote' })).status,
    ).toBe(201)
    // Ports are offered now (through the preview proxy): nothing listens there, so 502, not 501.
    const res = await srv.fetch('/v1/sessions/remote-1/ports/8000/')
    expect(res.status).toBe(502)
    expect(((await res.json()) as ErrorAnswer).error?.code).toBe('PORT_UNREACHABLE')
    const ws = new WebSocket(
      `${srv.url.replace(/^http/, 'ws')}/v1/sessions/remote-1/terminal?cols=80&rows=24`,
      {
        headers: { authorization: `Bearer ${srv.key}` },
      },
    )
    const out = collect(ws)
    const end = closed(ws)
    await opened(ws)
    ws.send(Buffer.from('echo "size=$(stty size) term=$TERM"\n'))
    await out.until((s) => s.includes('size=24 80 term=xterm-256color'), 'the terminal’s size')
    ws.send(JSON.stringify({ type: 'resize', cols: 100, rows: 40 }))
    ws.send(Buffer.from('echo "size=$(stty size)"; exit 5\n'))
    expect((await end).code).toBe(1000)
    expect(out.text()).toContain('size=40 100')
    expect(out.json()).toContainEqual({ type: 'exit', exitCode: 5 })
  }, 180_000)

  test('sbx api (fleet) answers 501 UNSUPPORTED pointing at sbx serve', async () => {
    const scope = uniqueName('ports-api')
    const srv = await startSbxServer('api', { config: fleetConfig(scope) })
    stops.push(async () => {
      await srv.stop()
      await removeScope(scope)
    })
    const res = await srv.fetch('/v1/sessions/any/ports/8000/')
    expect(res.status).toBe(501)
    const body = (await res.json()) as ErrorAnswer
    expect(body.error?.code).toBe('UNSUPPORTED')
    expect(body.error?.message).toContain('sbx serve')
    const ws = new WebSocket(`${srv.url.replace(/^http/, 'ws')}/v1/sessions/any/terminal`, {
      headers: { authorization: `Bearer ${srv.key}` },
    })
    expect(await refusedWith(ws)).toBe(501)
  }, 180_000)
})
