import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { startLiveService } from '../support/live-service.js'
import type { LiveService } from '../support/live-service.js'
import type { LiveServer } from '../support/live-service.js'

const ACME = 'acme-key-0123456789abcdef'
const GLOBEX = 'globex-key-0123456789abcdef'
const OPS = 'ops-admin-key-0123456789abcdef'

let server: LiveServer
const prefix = `e2e${process.pid}${Date.now().toString(36)}`

let live: LiveService

beforeAll(async () => {
  live = await startLiveService({
    prefix,
    keys: [
      { key: ACME, tenant: 'acme' },
      { key: GLOBEX, tenant: 'globex' },
      { key: OPS, tenant: 'ops', admin: true },
    ],
  })
  server = live.server
}, 120_000)

afterAll(() => live?.close(), 60_000)

function api(path: string, init: RequestInit & { key?: string } = {}): Promise<Response> {
  const headers = new Headers(init.headers)
  if (init.key !== undefined) headers.set('authorization', `Bearer ${init.key}`)
  if (init.body && !headers.has('content-type')) headers.set('content-type', 'application/json')
  return fetch(`${server.url}${path}`, { ...init, headers })
}

describe('HTTP API (embedded runtime, real Docker)', () => {
  test('health, readiness, docs and the OpenAPI document answer', async () => {
    expect(await (await api('/healthz')).json()).toEqual({ ok: true })
    const ready = await api('/readyz')
    expect(ready.status).toBe(200)
    expect(((await ready.json()) as { checks: Record<string, { ok: boolean }> }).checks['docker']?.ok).toBe(
      true,
    )
    const doc = (await (await api('/openapi.json')).json()) as {
      openapi: string
      paths: Record<string, unknown>
    }
    expect(doc.openapi).toBe('3.1.0')
    expect(Object.keys(doc.paths)).toEqual(
      expect.arrayContaining(['/v1/exec', '/v1/jobs/{id}', '/v1/tool-calls', '/v1/sessions']),
    )
    expect((await api('/docs')).status).toBe(200)
    // Metrics need a key; fleet-wide series are admin scope (test/e2e/metrics-tenancy.test.ts).
    expect((await api('/metrics')).status).toBe(401)
    expect(await (await api('/metrics', { key: OPS })).text()).toContain('sbx_exec_duration_seconds')
  })

  test('auth: missing and unknown keys are 401 JSON errors', async () => {
    const none = await api('/v1/sessions')
    expect(none.status).toBe(401)
    expect(await none.json()).toEqual({
      error: { code: 'UNAUTHORIZED', message: expect.stringContaining('Bearer') },
    })
    expect((await api('/v1/sessions', { key: 'wrong-key-0123456789' })).status).toBe(401)
  })

  test('exec runs a command and returns the result', async () => {
    const r = await api('/v1/exec', {
      method: 'POST',
      key: ACME,
      body: JSON.stringify({
        provider: 'docker',
        profile: 'default',
        command: 'echo hello; echo oops >&2; exit 3',
      }),
    })
    expect(r.status).toBe(200)
    const job = (await r.json()) as {
      state: string
      result: { exitCode: number; stdout: string; stderr: string }
    }
    expect(job.state).toBe('completed')
    expect(job.result).toMatchObject({ exitCode: 3, stdout: 'hello\n', stderr: 'oops\n' })
  })

  test('bad input names the field; unknown provider lists the known ones', async () => {
    const bad = await api('/v1/exec', {
      method: 'POST',
      key: ACME,
      body: JSON.stringify({ provider: 'docker', profile: 'default', command: 'ls', timeoutMs: -1 }),
    })
    expect(bad.status).toBe(400)
    expect(((await bad.json()) as { error: { message: string } }).error.message).toMatch(/timeoutMs/)
    const unknownField = await api('/v1/exec', {
      method: 'POST',
      key: ACME,
      body: JSON.stringify({ provider: 'docker', profile: 'default', command: 'ls', colour: 'red' }),
    })
    expect(unknownField.status).toBe(400)
    const badJson = await api('/v1/exec', { method: 'POST', key: ACME, body: '{"provider": ' })
    expect(badJson.status).toBe(400)
    const unknown = await api('/v1/exec', {
      method: 'POST',
      key: ACME,
      body: JSON.stringify({ provider: 'nope', profile: 'default', command: 'ls' }),
    })
    expect(unknown.status).toBe(400)
    expect(await unknown.json()).toEqual({
      error: { code: 'UNKNOWN_PROVIDER', message: expect.stringContaining('docker') },
    })
  })

  test('a session keeps its files; another tenant sees 404s', async () => {
    const created = await api('/v1/sessions', {
      method: 'POST',
      key: ACME,
      body: JSON.stringify({ id: 'files-1' }),
    })
    expect(created.status).toBe(201)
    const put = await api('/v1/sessions/files-1/files?path=notes/a.txt', {
      method: 'PUT',
      key: ACME,
      body: 'from the API',
      headers: { 'content-type': 'application/octet-stream' },
    })
    expect(put.status).toBe(200)
    const run = await api('/v1/exec', {
      method: 'POST',
      key: ACME,
      body: JSON.stringify({
        provider: 'docker',
        profile: 'default',
        sessionId: 'files-1',
        command: 'cat notes/a.txt; echo more > b.txt',
      }),
    })
    expect(((await run.json()) as { result: { stdout: string } }).result.stdout).toBe('from the API')
    const got = await api('/v1/sessions/files-1/files?path=b.txt', { key: ACME })
    expect(await got.text()).toBe('more\n')
    // cross-tenant: 404 everywhere
    expect((await api('/v1/sessions/files-1/files?path=b.txt', { key: GLOBEX })).status).toBe(404)
    expect((await api('/v1/sessions/files-1', { method: 'DELETE', key: GLOBEX })).status).toBe(404)
    const list = (await (await api('/v1/sessions', { key: GLOBEX })).json()) as { sessions: unknown[] }
    expect(list.sessions).toEqual([])
    expect((await api('/v1/sessions/files-1', { method: 'DELETE', key: ACME })).status).toBe(200)
    expect((await api('/v1/sessions/files-1/files?path=b.txt', { key: ACME })).status).toBe(404)
  })

  test('jobs: wait=false, Idempotency-Key, SSE events, cross-tenant 404, cancel', async () => {
    const body = JSON.stringify({
      provider: 'docker',
      profile: 'default',
      command: 'for i in 1 2 3; do echo line$i; done',
    })
    const a = await api('/v1/exec?wait=false', {
      method: 'POST',
      key: ACME,
      body,
      headers: { 'idempotency-key': 'k-1' },
    })
    expect(a.status).toBe(202)
    const job = (await a.json()) as { id: string }
    const again = (await (
      await api('/v1/exec?wait=false', {
        method: 'POST',
        key: ACME,
        body,
        headers: { 'idempotency-key': 'k-1' },
      })
    ).json()) as { id: string }
    expect(again.id).toBe(job.id)
    const reused = await api('/v1/exec?wait=false', {
      method: 'POST',
      key: ACME,
      body: JSON.stringify({ provider: 'docker', profile: 'default', command: 'echo something else' }),
      headers: { 'idempotency-key': 'k-1' },
    })
    expect(reused.status).toBe(409)
    expect(((await reused.json()) as { error: { code: string } }).error.code).toBe('CONFLICT')
    expect((await api(`/v1/jobs/${job.id}`, { key: GLOBEX })).status).toBe(404)
    const sse = await api(`/v1/jobs/${job.id}/events`, { key: ACME })
    expect(sse.headers.get('content-type')).toContain('text/event-stream')
    const text = await sse.text()
    expect(text).toContain('event: result')
    const final = (await (await api(`/v1/jobs/${job.id}`, { key: ACME })).json()) as {
      state: string
      result: { stdout: string }
    }
    expect(final).toMatchObject({ state: 'completed', result: { stdout: 'line1\nline2\nline3\n' } })

    const long = (await (
      await api('/v1/exec?wait=false', {
        method: 'POST',
        key: ACME,
        body: JSON.stringify({ provider: 'docker', profile: 'default', command: 'sleep 30' }),
      })
    ).json()) as { id: string }
    expect((await api(`/v1/jobs/${long.id}`, { method: 'DELETE', key: GLOBEX })).status).toBe(404)
    expect((await api(`/v1/jobs/${long.id}`, { method: 'DELETE', key: ACME })).status).toBe(200)
    const settled = (await (
      await api(`/v1/exec`, {
        method: 'POST',
        key: ACME,
        body: JSON.stringify({ provider: 'docker', profile: 'default', command: 'true' }),
      })
    ).json()) as { state: string }
    expect(settled.state).toBe('completed')
    let view = { state: 'running' }
    for (const deadline = Date.now() + 20_000; Date.now() < deadline && view.state !== 'cancelled';) {
      view = (await (await api(`/v1/jobs/${long.id}`, { key: ACME })).json()) as { state: string }
      if (view.state !== 'cancelled') await new Promise((r) => setTimeout(r, 50))
    }
    expect(view.state).toBe('cancelled')
  })

  test('tool-calls: bash is routed by policy and secrets in the output are redacted', async () => {
    const r = await api('/v1/tool-calls', {
      method: 'POST',
      key: ACME,
      body: JSON.stringify({ name: 'bash', arguments: { command: 'echo key=AKIAIOSFODNN7EXAMPLE' } }),
    })
    expect(r.status).toBe(200)
    const ev = (await r.json()) as { decision: { kind: string; providerId: string }; output: string }
    expect(ev.decision).toMatchObject({ kind: 'routeTo', providerId: 'docker' })
    expect(ev.output).toContain('[REDACTED:aws-access-key-id]')
    expect(ev.output).not.toContain('AKIAIOSFODNN7EXAMPLE')
    const other = (await (
      await api('/v1/tool-calls', {
        method: 'POST',
        key: ACME,
        body: JSON.stringify({ name: 'read_file', arguments: '{}' }),
      })
    ).json()) as { decision: { kind: string } }
    expect(other.decision.kind).toBe('allow')
    const blocked = (await (
      await api('/v1/tool-calls', {
        method: 'POST',
        key: ACME,
        body: JSON.stringify({ name: 'bash', arguments: { path: 'x' } }),
      })
    ).json()) as { decision: { kind: string } }
    expect(blocked.decision.kind).toBe('block')
  })

  test('providers lists docker with its profiles (the built-in default, dev and e2b)', async () => {
    const r = (await (await api('/v1/providers', { key: ACME })).json()) as {
      providers: { id: string; profiles: { name: string; network: string }[] }[]
    }
    expect(r.providers[0]).toMatchObject({
      id: 'docker',
      profiles: [
        expect.objectContaining({ name: 'default', network: 'none' }),
        expect.objectContaining({ name: 'dev', network: 'none' }),
        expect.objectContaining({ name: 'e2b', network: 'none' }),
      ],
    })
  })
})
