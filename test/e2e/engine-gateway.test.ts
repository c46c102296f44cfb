/*
 * A fleet over two Docker engines (issue 17) reaching a session's files and processes through the
 * API when the session's sandbox lives on an engine the API process does not reach: `sbx api` (its
 * DOCKER_HOST is the main engine) forwards those calls to the gateway of a worker of the session's
 * engine (the second dockerd, test/support/second-engine.ts), authorised by the fleet secret. Deletes,
 * snapshots and forks go there too; a snapshot is engine-local, so sessions from it start on its engine.
 */
import { randomBytes } from 'node:crypto'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { Redis } from 'ioredis'
import WebSocket from 'ws'
import { startEngineFleet } from '../support/engine-fleet.js'
import type { EngineFleet } from '../support/engine-fleet.js'
import { SHARED_REDIS } from '../support/sbx-cli.js'
import { dockerAt, MAIN_ENGINE_HOST } from '../support/second-engine.js'
import { closed, collect, opened, refusedWith } from '../support/terminal-socket.js'
import { PWS } from '../support/workspaces.js'

const SECRET = randomBytes(32).toString('hex')
const KEY_A = `sbx_test_a_${randomBytes(16).toString('hex')}`
const KEY_B = `sbx_test_b_${randomBytes(16).toString('hex')}`

let fleet: EngineFleet
let gatewayUrl: string

beforeAll(async () => {
  fleet = await startEngineFleet('enggw', {
    fleet: { secret: SECRET },
    profiles: { [PWS]: { provider: 'docker', workspace: { persistent: true } } },
    apiKeys: [
      { key: KEY_A, tenant: 'tenant-a', admin: true },
      { key: KEY_B, tenant: 'tenant-b' },
    ],
  })
  const line = fleet.workers.second.lines.find((l) => /gateway for engine/.test(l.text))?.text ?? ''
  gatewayUrl = /at (http\S+)/.exec(line)?.[1] ?? ''
}, 180_000)

afterAll(async () => {
  await fleet?.stop()
}, 120_000)

const as = (key: string, path: string, init: RequestInit = {}) => fleet.api.fetch(path, { ...init, key })

const post = (key: string, path: string, body: unknown) =>
  as(key, path, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  })

/** Runs `fn` while the main engine is drained: the sessions it first uses are placed on the second. */
async function onSecondEngine<T>(fn: () => Promise<T>): Promise<T> {
  expect((await fleet.engineCli(['drain', fleet.ids.main])).code).toBe(0)
  try {
    return await fn()
  } finally {
    expect((await fleet.engineCli(['undrain', fleet.ids.main])).code).toBe(0)
  }
}

/** Runs `command` in tenant A's session, waiting for its end; its stdout and sandbox. */
async function execA(sessionId: string, command: string, profile = 'default') {
  const res = await fleet.api.post(
    '/v1/exec',
    { provider: 'docker', profile, sessionId, command },
    { key: KEY_A },
  )
  const job = (await res.json()) as { state: string; result?: { stdout: string; sandboxId: string } }
  expect(job.state, JSON.stringify(job)).toBe('completed')
  return job.result ?? { stdout: '', sandboxId: '' }
}

/** Containers (any state) and images by id or name, asked of each engine. */
const containerAt = async (host: string, id: string) =>
  (await dockerAt(host, ['ps', '-aq', '--no-trunc', '--filter', `id=${id}`])).stdout.trim()
const imageAt = async (host: string, ref: string) =>
  (await dockerAt(host, ['images', '-q', ref])).stdout.trim()

interface ProcessView {
  id: string
  state: string
  exitCode: number | null
}

describe('a session on an engine the API does not reach', () => {
  const data = randomBytes(300_000)

  test("files, a background process and routed commands all reach the session's sandbox", async () => {
    expect(gatewayUrl, 'the worker prints its gateway URL').toMatch(/^http:\/\/127\.0\.0\.1:\d+$/)
    // Only the second engine takes new sessions while the main one is drained.
    expect((await fleet.engineCli(['drain', fleet.ids.main])).code).toBe(0)
    try {
      const created = await as(KEY_A, '/v1/sessions', {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ id: 'gw1', provider: 'docker', profile: 'default' }),
      })
      expect(created.status, await created.clone().text()).toBe(201)
      const put = await as(KEY_A, '/v1/sessions/gw1/files?path=/tmp/blob.bin', { method: 'PUT', body: data })
      expect(put.status, await put.clone().text()).toBe(200)
      expect(await put.json()).toMatchObject({ path: '/tmp/blob.bin', bytes: data.byteLength })
    } finally {
      expect((await fleet.engineCli(['undrain', fleet.ids.main])).code).toBe(0)
    }
    const view = (await (await as(KEY_A, '/v1/sessions/gw1')).json()) as { sandboxId?: string }
    expect(await fleet.engineOf(view.sandboxId ?? '')).toBe('second')

    // Download: the same bytes, from the second engine.
    const got = await as(KEY_A, '/v1/sessions/gw1/files?path=/tmp/blob.bin')
    expect(got.status).toBe(200)
    expect(Buffer.from(await got.arrayBuffer()).equals(data)).toBe(true)

    // A routed command of the session sees the uploaded file: the same sandbox.
    const exec = await fleet.api.post(
      '/v1/exec',
      { provider: 'docker', profile: 'default', sessionId: 'gw1', command: 'wc -c < /tmp/blob.bin' },
      { key: KEY_A },
    )
    const job = (await exec.json()) as { result?: { stdout: string; sandboxId: string } }
    expect(job.result?.stdout.trim()).toBe(String(data.byteLength))
    expect(job.result?.sandboxId).toBe(view.sandboxId)

    // A background process: started, its output read (long-polled until it has exited).
    const started = await as(KEY_A, '/v1/sessions/gw1/processes', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ command: 'for i in 1 2 3; do echo line$i; done; wc -c < /tmp/blob.bin' }),
    })
    expect(started.status, await started.clone().text()).toBe(201)
    const proc = (await started.json()) as ProcessView
    let out = ''
    let offset = 0
    let state = 'running'
    while (state === 'running') {
      const r = await as(
        KEY_A,
        `/v1/sessions/gw1/processes/${proc.id}/output?stdoutOffset=${offset}&waitMs=5000`,
      )
      expect(r.status, await r.clone().text()).toBe(200)
      const o = (await r.json()) as { process: ProcessView; stdout: { data: string; nextOffset: number } }
      out += o.stdout.data
      offset = o.stdout.nextOffset
      state = o.process.state
    }
    expect(state).toBe('exited')
    expect(out).toBe(`line1\nline2\nline3\n${data.byteLength}\n`)
    const listed = (await (await as(KEY_A, '/v1/sessions/gw1/processes')).json()) as {
      processes: ProcessView[]
    }
    expect(listed.processes.map((p) => [p.id, p.exitCode])).toEqual([[proc.id, 0]])
  })

  test("a port of the session's sandbox answers through the API (the gateway's port tunnel)", async () => {
    const served = await as(KEY_A, '/v1/sessions/gw1/processes', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        command:
          'mkdir -p /tmp/www && echo served-from-second > /tmp/www/index.html && exec httpd -f -p 8000 -h /tmp/www',
      }),
    })
    expect(served.status, await served.clone().text()).toBe(201)
    // Until httpd listens the port answers 502 PORT_UNREACHABLE; each try is one round trip.
    let res = await as(KEY_A, '/v1/sessions/gw1/ports/8000/index.html')
    for (let i = 0; i < 100 && res.status === 502; i++) {
      await res.arrayBuffer()
      res = await as(KEY_A, '/v1/sessions/gw1/ports/8000/index.html')
    }
    expect(res.status, await res.clone().text()).toBe(200)
    expect(await res.text()).toBe('served-from-second\n')
    // Another tenant: 404, as for the files.
    expect((await as(KEY_B, '/v1/sessions/gw1/ports/8000/index.html')).status).toBe(404)
  })

  test("a terminal of the session's sandbox over the API's WebSocket: typing, resize, close, exit", async () => {
    const url = `${fleet.api.url.replace(/^http/, 'ws')}/v1/sessions/gw1/terminal`
    const open = (key: string, query = '') =>
      new WebSocket(url + query, 'sbx.terminal.v1', { headers: { authorization: `Bearer ${key}` } })
    const ws = open(KEY_A, '?cols=80&rows=24')
    const out = collect(ws)
    await opened(ws)
    ws.send(Buffer.from('echo hi-$((6*7)); wc -c < /tmp/blob.bin; echo pid=$$\n'))
    const seen = await out.until((s) => /pid=\d+\r\n/.test(s), 'the echo')
    // The session's own sandbox: it holds the file uploaded to the second engine.
    expect(seen).toContain(`hi-42\r\n${data.byteLength}\r\n`)
    const pid = /pid=(\d+)\r\n/.exec(seen)?.[1]
    ws.send(JSON.stringify({ type: 'resize', cols: 100, rows: 40 }))
    ws.send(JSON.stringify({ type: 'input', data: 'stty size\n' }))
    await out.until((s) => s.includes('40 100\r\n'), 'stty size after the resize')
    const end = closed(ws)
    ws.close()
    await end
    // Closing the socket killed the terminal's shell on the second engine.
    let alive = true
    for (let i = 0; i < 100 && alive; i++)
      alive =
        (await execA('gw1', `kill -0 ${pid} 2>/dev/null && echo alive || echo gone`)).stdout.trim() ===
        'alive'
    expect(alive).toBe(false)

    // The shell's exit comes back through the tunnel, then the socket closes.
    const ws2 = open(KEY_A)
    const out2 = collect(ws2)
    const end2 = closed(ws2)
    await opened(ws2)
    ws2.send(Buffer.from('exit 3\n'))
    expect((await end2).code).toBe(1000)
    expect(out2.json()).toContainEqual({ type: 'exit', exitCode: 3 })

    // Another tenant: 404 before the upgrade.
    expect(await refusedWith(open(KEY_B))).toBe(404)
  })

  test("another tenant gets 404 for the session's files and processes", async () => {
    const file = await as(KEY_B, '/v1/sessions/gw1/files?path=/tmp/blob.bin')
    expect(file.status).toBe(404)
    expect(((await file.json()) as { error: { code: string } }).error.code).toBe('NOT_FOUND')
    const put = await as(KEY_B, '/v1/sessions/gw1/files?path=/tmp/evil', { method: 'PUT', body: 'x' })
    expect(put.status).toBe(404)
    expect((await as(KEY_B, '/v1/sessions/gw1/processes')).status).toBe(404)
    const start = await as(KEY_B, '/v1/sessions/gw1/processes', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ command: 'echo hi' }),
    })
    expect(start.status).toBe(404)
  })

  test('the gateway refuses a call without the fleet secret, or with a wrong one', async () => {
    const call = (headers: Record<string, string>) =>
      fetch(`${gatewayUrl}/internal/v1/call`, { method: 'POST', headers, body: 'x' })
    expect((await call({})).status).toBe(401)
    expect((await call({ 'x-sbx-fleet-secret': SECRET.slice(0, -1) + 'x' })).status).toBe(401)
    // A tenant's API key is not the fleet secret.
    expect((await call({ 'x-sbx-fleet-secret': KEY_A })).status).toBe(401)
    expect((await fetch(`${gatewayUrl}/v1/sessions`)).status).toBe(404)
    const logs = [...fleet.workers.second.lines, ...fleet.api.child.lines].map((l) => l.text).join('\n')
    expect(logs).not.toContain(SECRET)
  })
})

describe('deleting, snapshotting and forking a session on another engine', () => {
  test('DELETE removes the sandbox on its engine; another tenant gets 404 and changes nothing', async () => {
    const { sandboxId } = await onSecondEngine(async () => {
      expect((await post(KEY_A, '/v1/sessions', { id: 'del1', provider: 'docker' })).status).toBe(201)
      return execA('del1', 'true')
    })
    expect(await containerAt(fleet.second.host, sandboxId)).not.toBe('')
    expect((await as(KEY_B, '/v1/sessions/del1', { method: 'DELETE' })).status).toBe(404)
    expect(await containerAt(fleet.second.host, sandboxId)).not.toBe('')
    const del = await as(KEY_A, '/v1/sessions/del1', { method: 'DELETE' })
    expect(del.status, await del.clone().text()).toBe(200)
    // Gone at once, by the worker beside the engine (not left to its reaper).
    expect(await containerAt(fleet.second.host, sandboxId)).toBe('')
    expect((await as(KEY_A, '/v1/sessions/del1')).status).toBe(404)
  })

  test("a snapshot is taken on the session's engine; forks and sessions from it start there", async () => {
    await onSecondEngine(async () => {
      expect(
        (await post(KEY_A, '/v1/sessions', { id: 'src1', provider: 'docker', profile: PWS })).status,
      ).toBe(201)
      await execA('src1', 'echo from-second > /workspace/note.txt', PWS)
    })
    // Another tenant can neither snapshot nor fork it.
    expect((await post(KEY_B, '/v1/sessions/src1/snapshots', {})).status).toBe(404)
    expect((await post(KEY_B, '/v1/sessions/src1/fork', { count: 1 })).status).toBe(404)

    const taken = await post(KEY_A, '/v1/sessions/src1/snapshots', {})
    expect(taken.status, await taken.clone().text()).toBe(201)
    const snap = (await taken.json()) as { id: string; state: string }
    expect(snap.state).toBe('ready')
    const image = `sandbox-router/snapshot:${snap.id}`
    expect(await imageAt(fleet.second.host, image)).not.toBe('')
    expect(await imageAt(MAIN_ENGINE_HOST, image)).toBe('')

    // Both engines take sessions now: the fork and the session from the snapshot must still land on
    // the second, the only one holding the snapshot.
    const forked = await post(KEY_A, '/v1/sessions/src1/fork', { count: 1 })
    expect(forked.status, await forked.clone().text()).toBe(201)
    const [fork] = ((await forked.json()) as { sessions: { id: string }[] }).sessions
    const started = await post(KEY_A, '/v1/sessions', { snapshot: snap.id })
    expect(started.status, await started.clone().text()).toBe(201)
    const fromSnap = (await started.json()) as { id: string }
    for (const id of [fork?.id ?? '', fromSnap.id]) {
      const file = await as(KEY_A, `/v1/sessions/${id}/files?path=/workspace/note.txt`)
      expect(file.status, await file.clone().text()).toBe(200)
      expect(await file.text()).toBe('from-second\n')
      const view = (await (await as(KEY_A, `/v1/sessions/${id}`)).json()) as { sandboxId?: string }
      expect(await fleet.engineOf(view.sandboxId ?? '')).toBe('second')
    }

    // Another tenant cannot start from it; nor can anyone while its engine is drained (it would move).
    expect((await post(KEY_B, '/v1/sessions', { snapshot: snap.id })).status).toBe(404)
    expect((await fleet.engineCli(['drain', fleet.ids.second])).code).toBe(0)
    try {
      const refused = await post(KEY_A, '/v1/sessions', { snapshot: snap.id })
      expect(refused.status).toBe(503)
      expect(((await refused.json()) as { error: { message: string } }).error.message).toMatch(
        new RegExp(`snapshot ${snap.id} lives on Docker engine .*drained`),
      )
    } finally {
      expect((await fleet.engineCli(['undrain', fleet.ids.second])).code).toBe(0)
    }

    // Deleting it removes its image from the second engine.
    expect((await as(KEY_B, `/v1/snapshots/${snap.id}`, { method: 'DELETE' })).status).toBe(404)
    const gone = await as(KEY_A, `/v1/snapshots/${snap.id}`, { method: 'DELETE' })
    expect(gone.status, await gone.clone().text()).toBe(200)
    expect(await imageAt(fleet.second.host, image)).toBe('')
  })
})

describe('two workers beside one engine', () => {
  test('each serves its own gateway: one SIGKILLed, the calls go to the other at once', async () => {
    const extra = await fleet.addWorker('second')
    const urlOf = (lines: { text: string }[]) =>
      /at (http\S+)/.exec(lines.find((l) => /gateway for engine/.test(l.text))?.text ?? '')?.[1]
    const extraUrl = urlOf(extra.lines)
    expect(extraUrl).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/)
    expect(extraUrl).not.toBe(gatewayUrl)
    // Both are live: each answers a gateway call for the engine (401 without the secret proves it listens).
    expect((await fetch(`${extraUrl}/internal/v1/call`, { method: 'POST', body: 'x' })).status).toBe(401)

    // Kill the worker whose URL the engine's shared record names right now (read from Redis only to
    // choose whom to kill): the hard case for a single shared URL.
    const redis = new Redis(SHARED_REDIS)
    const record = JSON.parse((await redis.hget(`${fleet.prefix}:engines`, fleet.ids.second)) ?? '{}') as {
      gatewayUrl?: string
    }
    await redis.quit()
    await (record.gatewayUrl === extraUrl ? extra : fleet.workers.second).kill()
    // Right after the kill the dead worker's gateway is still listed (until its heartbeat is stale):
    // a call that picks it is refused at connect and goes to the live one at once.
    const took: number[] = []
    for (let i = 0; i < 20; i++) {
      const t0 = performance.now()
      const got = await as(KEY_A, '/v1/sessions/gw1/files?path=/tmp/blob.bin')
      expect(got.status, await got.clone().text()).toBe(200)
      expect((await got.arrayBuffer()).byteLength).toBe(300_000)
      took.push(performance.now() - t0)
    }
    console.log(
      `file reads right after the SIGKILL of ${record.gatewayUrl === extraUrl ? 'the added' : 'the first'} worker (ms): ${took.map((t) => t.toFixed(0)).join(' ')}; ` +
        `max ${Math.max(...took).toFixed(0)}`,
    )
    const listed = await as(KEY_A, '/v1/sessions/gw1/processes')
    expect(listed.status, await listed.clone().text()).toBe(200)
    // A routed command: the surviving worker consumes the engine's lane too.
    expect((await execA('gw1', 'wc -c < /tmp/blob.bin')).stdout.trim()).toBe('300000')
    // And a terminal, through the surviving worker's tunnel.
    const ws = new WebSocket(
      `${fleet.api.url.replace(/^http/, 'ws')}/v1/sessions/gw1/terminal`,
      'sbx.terminal.v1',
      { headers: { authorization: `Bearer ${KEY_A}` } },
    )
    const out = collect(ws)
    await opened(ws)
    ws.send(Buffer.from('echo still-$((40+2))\n'))
    await out.until((s) => s.includes('still-42\r\n'), 'the echo after the kill')
    const end = closed(ws)
    ws.close()
    await end
  })
})
