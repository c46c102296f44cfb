import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { startLiveService } from '../support/live-service.js'
import type { LiveService } from '../support/live-service.js'
import type { LiveServer } from '../support/live-service.js'

const KEY = 'quota-key-0123456789abcdef'
const OTHER = 'other-key-0123456789abcdef'
let server: LiveServer

let live: LiveService

beforeAll(async () => {
  live = await startLiveService({
    prefix: `quota${process.pid}`,
    config: { quotas: { maxConcurrentJobs: 1, maxSandboxes: 1, requestsPerSecond: 5 } },
    keys: [
      { key: KEY, tenant: 'small' },
      { key: OTHER, tenant: 'other' },
    ],
  })
  ;({ server } = live)
}, 120_000)

afterAll(() => live?.close(), 60_000)

const post = (path: string, body: unknown, key = KEY): Promise<Response> =>
  fetch(`${server.url}${path}`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  })

describe('per-tenant quotas', () => {
  test('concurrent jobs: the second job of a tenant at its cap is a 429 with Retry-After; other tenants are unaffected', async () => {
    const first = await post('/v1/exec?wait=false', {
      provider: 'docker',
      profile: 'default',
      command: 'sleep 20',
    })
    expect(first.status).toBe(202)
    const { id } = (await first.json()) as { id: string }
    const second = await post('/v1/exec?wait=false', {
      provider: 'docker',
      profile: 'default',
      command: 'true',
    })
    expect(second.status).toBe(429)
    expect(second.headers.get('retry-after')).toBeTruthy()
    expect(((await second.json()) as { error: { code: string } }).error.code).toBe('QUOTA_EXCEEDED')
    const other = await post(
      '/v1/exec',
      { provider: 'docker', profile: 'default', command: 'echo ok' },
      OTHER,
    )
    expect(other.status).toBe(200)
    // 200 comes as soon as the job is accepted; the body is the job once it ended
    expect(((await other.json()) as { state: string }).state).toBe('completed')
    // cancelling frees the slot once the job is over
    await fetch(`${server.url}/v1/jobs/${id}`, {
      method: 'DELETE',
      headers: { authorization: `Bearer ${KEY}` },
    })
    // the job's event stream ends with its result once the cancel has taken effect
    const events = await fetch(`${server.url}/v1/jobs/${id}/events`, {
      headers: { authorization: `Bearer ${KEY}` },
    })
    expect(await events.text()).toContain('event: result')
    const third = await post('/v1/exec', { provider: 'docker', profile: 'default', command: 'echo again' })
    expect(third.status).toBe(200)
    expect(((await third.json()) as { state: string }).state).toBe('completed')
  })

  test('one call after another never meets its own finished ephemeral sandbox in the quota', async () => {
    for (let i = 0; i < 6; i++) {
      const r = await post(
        '/v1/exec',
        { provider: 'docker', profile: 'default', command: `echo ${i}` },
        OTHER,
      )
      expect(r.status, await r.clone().text()).toBe(200)
      expect(((await r.json()) as { state: string }).state).toBe('completed')
    }
  })

  test('concurrent sandboxes: a second session over the cap is refused up front: 429 QUOTA_EXCEEDED', async () => {
    const a = await post(
      '/v1/exec',
      { provider: 'docker', profile: 'default', sessionId: 'q-a', command: 'true' },
      OTHER,
    )
    expect(((await a.json()) as { state: string }).state).toBe('completed')
    const res = await post(
      '/v1/exec',
      { provider: 'docker', profile: 'default', sessionId: 'q-b', command: 'true' },
      OTHER,
    )
    expect(res.status).toBe(429)
    expect(res.headers.get('retry-after')).not.toBeNull()
    const b = (await res.json()) as { error?: { code: string; message: string } }
    expect(b.error?.code).toBe('QUOTA_EXCEEDED')
    expect(b.error?.message).toContain('quotas.maxSandboxes = 1')
    await fetch(`${server.url}/v1/sessions/q-a`, {
      method: 'DELETE',
      headers: { authorization: `Bearer ${OTHER}` },
    })
  })

  test('requests per second: a burst past the bucket gets 429 with Retry-After', async () => {
    const statuses = await Promise.all(
      Array.from({ length: 25 }, () =>
        fetch(`${server.url}/v1/sessions`, { headers: { authorization: `Bearer ${KEY}` } }),
      ),
    )
    const limited = statuses.filter((r) => r.status === 429)
    expect(limited.length).toBeGreaterThan(0)
    expect(limited[0]?.headers.get('retry-after')).toMatch(/^\d+$/)
    expect(statuses.filter((r) => r.status === 200).length).toBeGreaterThan(0)
  })
})
