import { randomUUID } from 'node:crypto'
import { performance } from 'node:perf_hooks'
import { setTimeout as delay } from 'node:timers/promises'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { createDockerProvider } from '../../providers/docker/index.js'
import type { DockerProvider } from '../../providers/docker/index.js'
import { POOL_LABELS } from '../../src/sessions/index.js'
import { startLiveService } from '../support/live-service.js'
import type { LiveService } from '../support/live-service.js'
import { RedisServer } from '../support/redis-server.js'

/*
 * The HTTP service in fleet mode (BullMQ on the test's own redis-server; API and exec worker in this
 * process), with Redis SIGKILLed under it: readiness and every Redis-backed endpoint answer 503 with a
 * reason, fast, never 500 and never a hang; once Redis is back the same service serves again.
 */

const KEY = 'redis-api-key-0123456789abcdef'
const prefix = `rapi${randomUUID().slice(0, 8)}`
/** An answer while Redis is away must come within this (no hang). */
const ANSWER_WITHIN_MS = 5_000

let redis: RedisServer | undefined
let live: LiveService | undefined
let docker: DockerProvider | undefined

const containers = async (d: DockerProvider): Promise<string[]> =>
  (await d.docker.listContainers({ all: true, filters: { label: [`${POOL_LABELS.scope}=${prefix}`] } })).map(
    (c) => c.Id,
  )

beforeAll(async () => {
  redis = await RedisServer.start()
  docker = createDockerProvider({ instanceId: prefix })
  live = await startLiveService({
    prefix,
    keys: [{ key: KEY, tenant: 'acme' }],
    config: { queue: { driver: 'bullmq', redisUrl: redis.url, prefix } },
  })
}, 120_000)

afterAll(async () => {
  const d = docker
  try {
    if (redis && !redis.running) {
      // A failed test left Redis down: bring it back and let the service reconnect before closing it.
      await redis.launch()
      const deadline = performance.now() + 15_000
      while (live && performance.now() < deadline && (await call('/readyz')).status !== 200) await delay(100)
    }
    await live?.close()
    if (d) {
      for (const c of await containers(d)) await d.destroy({ providerId: 'docker', id: c, profile: '' })
      expect(await containers(d)).toEqual([])
    }
  } finally {
    await d?.close()
    await redis?.destroy()
  }
}, 120_000)

interface Answer {
  status: number
  body: {
    ok?: boolean
    checks?: Record<string, { ok: boolean; reason?: string }>
    error?: { code: string; message: string }
    id?: string
    state?: string
    result?: { stdout: string }
  }
  headers: Headers
  ms: number
}

async function call(path: string, init: { method?: string; body?: unknown } = {}): Promise<Answer> {
  const url = `${(live as LiveService).server.url}${path}`
  const t0 = performance.now()
  const res = await fetch(url, {
    method: init.method ?? 'GET',
    headers: { authorization: `Bearer ${KEY}`, 'content-type': 'application/json' },
    ...(init.body === undefined ? {} : { body: JSON.stringify(init.body) }),
    signal: AbortSignal.timeout(60_000),
  })
  const text = await res.text()
  return {
    status: res.status,
    body: JSON.parse(text) as Answer['body'],
    headers: res.headers,
    ms: performance.now() - t0,
  }
}

const exec = (command: string, extra: Record<string, unknown> = {}, query = '') =>
  call(`/v1/exec${query}`, {
    method: 'POST',
    body: { provider: 'docker', profile: 'default', command, ...extra },
  })

describe('the API while Redis is away', () => {
  test('readiness and Redis-backed endpoints answer 503 with a reason, fast; the service serves again once Redis is back', async () => {
    const server = redis as RedisServer
    const ready = await call('/readyz')
    expect(ready.status, JSON.stringify(ready.body)).toBe(200)
    expect(ready.body.checks?.['redis']).toEqual({ ok: true })
    expect((await exec('echo before > f; cat f', { sessionId: 'api-s' })).body.result?.stdout).toBe(
      'before\n',
    )
    // Accepted just before the kill: it must still finish once Redis is back.
    const accepted = await exec('sleep 1; echo survived', { sessionId: 'api-s' }, '?wait=false')
    expect(accepted.status).toBe(202)
    const acceptedId = accepted.body.id as string

    await server.kill9()
    const answers: Record<string, Answer> = {
      healthz: await call('/healthz'),
      readyz: await call('/readyz'),
      exec: await exec('echo during'),
      execInSession: await exec('echo during', { sessionId: 'api-s' }),
      execNoWait: await exec('echo during', {}, '?wait=false'),
      job: await call(`/v1/jobs/${acceptedId}`),
      cancel: await call(`/v1/jobs/${acceptedId}`, { method: 'DELETE' }),
      sessions: await call('/v1/sessions'),
      toolCall: await call('/v1/tool-calls', {
        method: 'POST',
        body: { name: 'bash', arguments: { command: 'echo during' }, sessionId: 'api-s' },
      }),
      // Without a session nothing touches Redis before the submit: it must be the same 503, not a 200 tool output.
      toolCallNoSession: await call('/v1/tool-calls', {
        method: 'POST',
        body: { name: 'bash', arguments: { command: 'echo during' } },
      }),
    }
    console.log(
      `[redis-api] while Redis is away: ${JSON.stringify(
        Object.fromEntries(
          Object.entries(answers).map(([k, a]) => [
            k,
            {
              status: a.status,
              ms: Math.round(a.ms),
              code: a.body.error?.code,
              message: a.body.error?.message,
            },
          ]),
        ),
        null,
        1,
      )}`,
    )
    // Alive, not ready.
    expect(answers['healthz']?.status).toBe(200)
    const readyz = answers['readyz'] as Answer
    expect(readyz.status).toBe(503)
    expect(readyz.body.checks?.['redis']?.ok).toBe(false)
    expect(readyz.body.checks?.['redis']?.reason).toContain(server.url)
    expect(readyz.body.error?.code).toBe('UNAVAILABLE')
    expect(readyz.body.error?.message).toMatch(/redis: .*unreachable/)
    // Every Redis-backed call: 503 QUEUE_UNAVAILABLE with a message, fast; never a 500.
    for (const [name, a] of Object.entries(answers)) {
      expect(a.ms, name).toBeLessThan(ANSWER_WITHIN_MS)
      if (name === 'healthz' || name === 'readyz') continue
      expect(a.status, `${name}: ${JSON.stringify(a.body)}`).toBe(503)
      expect(a.body.error?.code, name).toBe('QUEUE_UNAVAILABLE')
      expect(a.body.error?.message, name).toMatch(/Redis/)
      expect(a.headers.get('retry-after'), name).toBe('2')
    }

    // Back: the same service becomes ready and serves, without a restart.
    const backAt = await server.launch()
    let readyAgain: Answer
    while ((readyAgain = await call('/readyz')).status !== 200) await delay(100)
    const readyMs = performance.now() - backAt
    const after = await exec('cat f; echo after', { sessionId: 'api-s' })
    const firstExecMs = performance.now() - backAt
    expect(after.status, JSON.stringify(after.body)).toBe(200)
    expect(after.body.result?.stdout).toBe('before\nafter\n')
    expect(readyAgain.body.checks?.['redis']).toEqual({ ok: true })
    // The job accepted before the kill finished.
    let job: Answer
    while (['queued', 'running'].includes((job = await call(`/v1/jobs/${acceptedId}`)).body.state ?? ''))
      await delay(100)
    console.log(
      `[redis-api] Redis back -> /readyz 200 in ${Math.round(readyMs)} ms, first exec 200 in ${Math.round(firstExecMs)} ms; ` +
        `job accepted before the kill: ${job.body.state}` +
        (job.body.state === 'completed' ? '' : ` ${JSON.stringify(job.body)}`),
    )
    expect(job.body.state).toBe('completed')
    expect(job.body.result?.stdout).toBe('survived\n')
  }, 180_000)
})
