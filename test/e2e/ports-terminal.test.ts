import { readFileSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import WebSocket from 'ws'
import { removeScope, startSbxServer, uniqueName } from '../support/sbx-cli.js'
import type { SbxServer } from '../support/sbx-cli.js'
import { closed, collect, opened, refusedWith } from '../support/terminal-socket.js'

/**
 * Ports and terminals through `node bin/sbx.js serve` on the real engine, over public interfaces
 * only (HTTP, WebSocket): servers inside a `network: none` sandbox are reached at
 * `/v1/sessions/{id}/ports/{port}/…` through the agent channel, and a terminal is a WebSocket PTY.
 */

const KEY_A = 'ports-key-a-0123456789abcdef0123'
const KEY_B = 'ports-key-b-0123456789abcdef0123'
const fixture = (name: string): string =>
  readFileSync(fileURLToPath(new URL(`./fixtures/ports/${name}`, import.meta.url)), 'utf8')

interface Answer {
  state?: string
  result?: { exitCode: number | null; stdout: string; stderr: string }
  error?: { code: string; message: string }
}

describe('ports and terminals through sbx serve', () => {
  const scope = uniqueName('ports')
  let srv: SbxServer
  let wsBase: string

  const exec = async (command: string): Promise<Answer> => {
    const res = await srv.post('/v1/exec', {
      provider: 'docker',
      profile: 'default',
      sessionId: 'web',
      command,
    })
    expect(res.status).toBe(200)
    return (await res.json()) as Answer
  }
  const upload = async (path: string, body: string): Promise<void> => {
    const res = await srv.fetch(`/v1/sessions/web/files?path=${encodeURIComponent(path)}`, {
      method: 'PUT',
      body,
    })
    expect(res.status, await res.clone().text()).toBeLessThan(300)
  }

  beforeAll(async () => {
    srv = await startSbxServer('serve', {
      config: {
        queue: { prefix: scope },
        apiKeys: [
          { key: KEY_A, tenant: 'acme' },
          { key: KEY_B, tenant: 'globex' },
        ],
        profiles: { default: { provider: 'docker' } },
      },
      env: { SBX_API_KEY: KEY_A },
    })
    wsBase = srv.url.replace(/^http/, 'ws')
    const created = await srv.post('/v1/sessions', { id: 'web', provider: 'docker', profile: 'default' })
    expect(created.status).toBe(201)
    await upload('/tmp/www/index.html', 'hello from the sandbox\n')
    await upload('/tmp/www/cgi-bin/echo', fixture('echo.cgi'))
    await upload('/tmp/ws-echo.sh', fixture('ws-echo.sh'))
    await upload('/tmp/www/cgi-bin/stream', fixture('stream.cgi'))
    // Servers in the background (their output redirected, so the command ends), then wait until both listen.
    const started = await exec(
      'chmod +x /tmp/www/cgi-bin/echo /tmp/www/cgi-bin/stream /tmp/ws-echo.sh; ' +
        '{ httpd -f -p 8000 -h /tmp/www </dev/null >/dev/null 2>&1 & } ; ' +
        '{ nc -ll -p 9000 -e /tmp/ws-echo.sh </dev/null >/dev/null 2>&1 & } ; ' +
        'for i in $(seq 100); do n=$(netstat -ltn | grep -c -E ":(8000|9000) "); [ "$n" -ge 2 ] && break; sleep 0.05; done; ' +
        'netstat -ltn',
    )
    expect(started.result?.stdout).toMatch(/:8000 /)
    expect(started.result?.stdout).toMatch(/:9000 /)
  }, 180_000)

  afterAll(async () => {
    await srv?.stop()
    await removeScope(scope)
  }, 60_000)

  test('GET through the port URL reaches busybox httpd in a network: none sandbox', async () => {
    const res = await srv.fetch('/v1/sessions/web/ports/8000/index.html')
    expect(res.status).toBe(200)
    expect(await res.text()).toBe('hello from the sandbox\n')
    // The sandbox really has no network: only loopback.
    const net = await exec('ls /sys/class/net')
    expect(net.result?.stdout.trim()).toBe('lo')
  }, 60_000)

  test('POST: method and body reach the server; its answer comes back', async () => {
    const res = await srv.fetch('/v1/sessions/web/ports/8000/cgi-bin/echo?x=1', {
      method: 'POST',
      headers: { 'content-type': 'text/plain' },
      body: 'ping-body-\u00e9',
    })
    expect(res.status).toBe(200)
    expect(await res.text()).toBe('method=POST\nping-body-\u00e9')
  }, 60_000)

  test('concurrent connections share the channel; a stalled download holds up neither them nor commands', async () => {
    const made = await exec(
      'head -c 8388608 /dev/zero | tr "\\0" a > /tmp/www/big.txt; wc -c < /tmp/www/big.txt',
    )
    expect(made.result?.stdout.trim()).toBe('8388608')
    // Headers only: nobody reads the 8 MiB body yet, so its stream's window fills and the agent stops reading it.
    const stalled = await srv.fetch('/v1/sessions/web/ports/8000/big.txt')
    expect(stalled.status).toBe(200)
    const t0 = performance.now()
    const [cmd, ...pages] = await Promise.all([
      exec('echo still-fast'),
      ...Array.from({ length: 8 }, () =>
        srv.fetch('/v1/sessions/web/ports/8000/index.html').then((r) => r.text()),
      ),
    ])
    expect(cmd.result?.stdout).toBe('still-fast\n')
    expect(pages).toEqual(Array.from({ length: 8 }, () => 'hello from the sandbox\n'))
    expect(performance.now() - t0).toBeLessThan(10_000)
    // The stalled body then arrives whole.
    const body = Buffer.from(await stalled.arrayBuffer())
    expect(body.length).toBe(8388608)
    expect(body.every((b) => b === 0x61)).toBe(true)
  }, 120_000)

  test('a streamed answer (Server-Sent Events) arrives as the server writes it', async () => {
    const res = await srv.fetch('/v1/sessions/web/ports/8000/cgi-bin/stream')
    expect(res.status).toBe(200)
    expect(res.headers.get('content-type')).toBe('text/event-stream')
    const reader = res.body!.getReader()
    let text = ''
    while (!text.includes('data: first\n\n')) {
      const { value, done } = await reader.read()
      if (done) break
      text += Buffer.from(value).toString('utf8')
    }
    // The second event is written only once /tmp/go exists: the first came through before the end.
    expect(text).toBe('data: first\n\n')
    await exec('touch /tmp/go')
    for (;;) {
      const { value, done } = await reader.read()
      if (done) break
      text += Buffer.from(value).toString('utf8')
    }
    expect(text).toBe('data: first\n\ndata: second\n\n')
  }, 60_000)

  test('a 4 MiB upload streams into the server and its 4 MiB answer streams back', async () => {
    const body = Buffer.alloc(4 * 1024 * 1024, 0x62)
    const res = await srv.fetch('/v1/sessions/web/ports/8000/cgi-bin/echo', { method: 'POST', body })
    expect(res.status).toBe(200)
    const back = Buffer.from(await res.arrayBuffer())
    expect(back.length).toBe('method=POST\n'.length + body.length)
    expect(back.subarray('method=POST\n'.length).equals(body)).toBe(true)
  }, 120_000)

  test('a port with nothing listening is a 502 that says so', async () => {
    const res = await srv.fetch('/v1/sessions/web/ports/8001/')
    expect(res.status).toBe(502)
    const body = (await res.json()) as Answer
    expect(body.error?.code).toBe('PORT_UNREACHABLE')
    expect(body.error?.message).toContain('nothing listens on 127.0.0.1:8001 in the sandbox')
  }, 60_000)

  test('a bad port number is a 400 naming the range', async () => {
    const res = await srv.fetch('/v1/sessions/web/ports/99999/')
    expect(res.status).toBe(400)
    expect(((await res.json()) as Answer).error?.message).toContain('1-65535')
  }, 60_000)

  test("another tenant's key gets 404 for the session's ports and terminal", async () => {
    const res = await srv.fetch('/v1/sessions/web/ports/8000/index.html', { key: KEY_B })
    expect(res.status).toBe(404)
    expect(((await res.json()) as Answer).error?.code).toBe('NOT_FOUND')
    const ws = new WebSocket(`${wsBase}/v1/sessions/web/terminal`, {
      headers: { authorization: `Bearer ${KEY_B}` },
    })
    expect(await refusedWith(ws)).toBe(404)
    const noKey = new WebSocket(`${wsBase}/v1/sessions/web/terminal`)
    expect(await refusedWith(noKey)).toBe(401)
  }, 60_000)

  test('a WebSocket through the port URL reaches a WebSocket server in the sandbox', async () => {
    const ws = new WebSocket(`${wsBase}/v1/sessions/web/ports/9000/echo`, {
      headers: { authorization: `Bearer ${KEY_A}` },
    })
    const got = new Promise<string>((resolve) => ws.once('message', (d) => resolve(String(d))))
    await opened(ws)
    ws.send('hello-ws')
    expect(await got).toBe('hello-ws')
    const end = closed(ws)
    ws.close(1000)
    expect((await end).code).toBe(1000)
  }, 60_000)

  test('terminal: type, read, resize, close (the key as a subprotocol, as a browser sends it)', async () => {
    const ws = new WebSocket(`${wsBase}/v1/sessions/web/terminal?cols=80&rows=24`, [
      'sbx.terminal.v1',
      `sbx.bearer.${Buffer.from(KEY_A).toString('base64url')}`,
    ])
    const out = collect(ws)
    await opened(ws)
    expect(ws.protocol).toBe('sbx.terminal.v1')
    ws.send(Buffer.from('echo hi; pwd; echo pid=$$\n'))
    const seen = await out.until((s) => /pid=\d+\r\n/.test(s), 'echo hi; pwd')
    expect(seen).toContain('hi\r\n/workspace\r\n')
    const pid = /pid=(\d+)\r\n/.exec(seen)?.[1]
    ws.send(JSON.stringify({ type: 'resize', cols: 100, rows: 40 }))
    ws.send(JSON.stringify({ type: 'input', data: 'stty size\n' }))
    await out.until((s) => s.includes('40 100\r\n'), 'stty size after the resize')
    const end = closed(ws)
    ws.close()
    await end
    // Closing the socket killed the terminal's shell: its pid is gone from the sandbox.
    let alive = true
    for (let i = 0; i < 100 && alive; i++) {
      const r = await exec(`kill -0 ${pid} 2>/dev/null && echo alive || echo gone`)
      alive = r.result?.stdout.trim() === 'alive'
    }
    expect(alive).toBe(false)
  }, 60_000)

  test('terminal: 3 MB of output arrives whole; a bad control message is answered with an error', async () => {
    const ws = new WebSocket(`${wsBase}/v1/sessions/web/terminal`, 'sbx.terminal.v1', {
      headers: { authorization: `Bearer ${KEY_A}` },
    })
    const out = collect(ws)
    await opened(ws)
    ws.send(JSON.stringify({ type: 'bogus' }))
    ws.send(Buffer.from("head -c 3000000 /dev/zero | tr '\\0' y; echo; echo END-$((6*7))\n"))
    const seen = await out.until((s) => s.includes('END-42'), 'the end of 3 MB of output')
    expect(seen.split('y').length - 1).toBeGreaterThanOrEqual(3_000_000)
    expect(out.json()[0]).toMatchObject({ type: 'error', message: expect.stringContaining('resize') })
    const end = closed(ws)
    ws.close()
    await end
  }, 60_000)

  test("terminal: the shell's exit is reported, then the socket closes", async () => {
    const ws = new WebSocket(`${wsBase}/v1/sessions/web/terminal`, 'sbx.terminal.v1', {
      headers: { authorization: `Bearer ${KEY_A}` },
    })
    const out = collect(ws)
    const end = closed(ws)
    await opened(ws)
    ws.send(Buffer.from('exit 3\n'))
    expect((await end).code).toBe(1000)
    expect(out.json()).toContainEqual({ type: 'exit', exitCode: 3 })
    expect(out.text()).toContain('exit')
  }, 60_000)

  test('the OpenAPI document describes the port URL and the terminal', async () => {
    const doc = (await (await srv.fetch('/openapi.json')).json()) as {
      paths: Record<string, Record<string, unknown>>
    }
    expect(Object.keys(doc.paths['/v1/sessions/{id}/ports/{port}/{path}'] ?? {})).toEqual(
      expect.arrayContaining(['get', 'post', 'delete']),
    )
    expect(doc.paths['/v1/sessions/{id}/terminal']?.['get']).toBeDefined()
  }, 60_000)

  test('terminal: a plain GET is told to use a WebSocket', async () => {
    const res = await srv.fetch('/v1/sessions/web/terminal')
    expect(res.status).toBe(400)
    expect(((await res.json()) as Answer).error?.message).toContain('WebSocket')
  }, 60_000)
})
