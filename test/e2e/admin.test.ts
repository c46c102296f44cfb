import { randomUUID } from 'node:crypto'
import type { AddressInfo } from 'node:net'
import { OpenAPIHono } from '@hono/zod-openapi'
import { serve } from '@hono/node-server'
import { Queue } from 'bullmq'
import { Redis } from 'ioredis'
import { describe, expect, test } from 'vitest'
import { ADMIN_SESSION_COOKIE, openDashboardQueues, registerAdminRoutes } from '../../src/http/admin.js'
import type { AdminRoutesOptions } from '../../src/http/admin.js'
import type { App, HttpEnv } from '../../src/http/app.js'
import { toErrorResponse } from '../../src/http/errors.js'
import { Keyring } from '../../src/http/keyring.js'

const REDIS_URL = process.env['REDIS_URL'] ?? 'redis://127.0.0.1:6379'
const ADMIN = 'admin-key-0123456789abcdef'
const USER = 'user-key-0123456789abcdef'
const SECRET = 'env-secret-value-4242'

interface Board {
  app: App
  producer: Queue
  jobId: string
  clock: { now: number }
}

/** The app's error mapping, as createApp installs it (one onError over toErrorResponse). */
function buildApp(options: Omit<AdminRoutesOptions, 'keyring'>): App {
  const app: App = new OpenAPIHono<HttpEnv>()
  app.onError((err, c) => {
    const { status, body } = toErrorResponse(err)
    return c.json(body, status)
  })
  app.use('*', async (c, next) => {
    c.set('requestId', randomUUID())
    await next()
  })
  registerAdminRoutes(app, {
    keyring: new Keyring([
      { key: ADMIN, tenant: 'ops', admin: true },
      { key: USER, tenant: 'acme' },
    ]),
    ...options,
  })
  return app
}

/** Each test: its own key prefix, the dashboard's queue handles, a producer with one waiting job. */
const boardTest = test.extend<{ board: Board }>({
  board: async ({}, use) => {
    const prefix = `test-admin-${randomUUID()}`
    const dashboard = await openDashboardQueues({ redisUrl: REDIS_URL, prefix })
    const redis = new Redis(REDIS_URL)
    const producer = new Queue('sbx-exec', { connection: redis, prefix })
    const job = await producer.add(
      'exec',
      { tenant: 'acme', command: 'echo hi', env: { TOKEN: SECRET }, stdin: 'hunter2' },
      { jobId: `job-${randomUUID()}` },
    )
    const clock = { now: 1_000_000 }
    const app = buildApp({ queues: dashboard.queues, sessionTtlMs: 60_000, now: () => clock.now })
    try {
      await use({ app, producer, jobId: job.id ?? '', clock })
    } finally {
      await dashboard.close()
      await producer.close()
      let cursor = '0'
      do {
        const [next, keys] = await redis.scan(cursor, 'MATCH', `${prefix}:*`, 'COUNT', 500)
        cursor = next
        if (keys.length) await redis.del(...keys)
      } while (cursor !== '0')
      await redis.quit()
    }
  },
})

const bearer = (key: string): RequestInit => ({ headers: { authorization: `Bearer ${key}` } })

/** The `name=value` pair of the session cookie a response set, and its attributes. */
function sessionCookie(res: Response): { pair: string; attrs: string } {
  const line = res.headers.getSetCookie().find((l) => l.startsWith(`${ADMIN_SESSION_COOKIE}=`))
  expect(line).toBeDefined()
  const [pair = '', ...attrs] = (line ?? '').split(';').map((s) => s.trim())
  return { pair, attrs: attrs.join('; ') }
}

describe('queue dashboard at /admin/queues (real BullMQ on local Redis)', () => {
  boardTest('401 without a key, with an unknown key, or with a forged cookie', async ({ board }) => {
    for (const init of [
      {},
      bearer('wrong-key-0123456789abcdef'),
      { headers: { cookie: `${ADMIN_SESSION_COOKIE}=${ADMIN}` } },
    ]) {
      for (const path of ['/admin/queues', '/admin/queues/api/queues']) {
        const res = await board.app.request(path, init)
        expect(res.status).toBe(401)
        expect(await res.json()).toEqual({ error: { code: 'UNAUTHORIZED', message: expect.any(String) } })
      }
    }
    const viaQuery = await board.app.request('/admin/queues?key=wrong-key-0123456789abcdef')
    expect(viaQuery.status).toBe(401)
    expect(viaQuery.headers.getSetCookie()).toEqual([])
  })

  boardTest('403 for a non-admin key, by header or by ?key=', async ({ board }) => {
    for (const res of [
      await board.app.request('/admin/queues', bearer(USER)),
      await board.app.request('/admin/queues/api/queues', bearer(USER)),
      await board.app.request(`/admin/queues?key=${USER}`),
    ]) {
      expect(res.status).toBe(403)
      expect(await res.json()).toEqual({
        error: { code: 'FORBIDDEN', message: expect.stringContaining('not an admin key') },
      })
      expect(res.headers.getSetCookie()).toEqual([])
    }
  })

  boardTest(
    'an admin bearer key gets the HTML page and the API lists sbx-exec with the job',
    async ({ board }) => {
      const page = await board.app.request('/admin/queues', bearer(ADMIN))
      expect(page.status).toBe(200)
      expect(page.headers.get('content-type')).toContain('text/html')
      const html = await page.text()
      expect(html).toContain('<base href="/admin/queues/"')
      expect(html).toContain('sandbox-router queues')

      const res = await board.app.request(
        '/admin/queues/api/queues?activeQueue=sbx-exec&status=waiting&page=1',
        bearer(ADMIN),
      )
      expect(res.status).toBe(200)
      const text = await res.text()
      const body = JSON.parse(text) as {
        queues: {
          name: string
          readOnlyMode: boolean
          counts: Record<string, number>
          jobs: { id: string; data: unknown }[]
        }[]
      }
      const queue = body.queues.find((q) => q.name === 'sbx-exec')
      expect(queue?.counts['waiting']).toBe(1)
      expect(queue?.readOnlyMode).toBe(true)
      expect(queue?.jobs.map((j) => j.id)).toEqual([board.jobId])
      // Env values and stdin may be a tenant's secrets: the board shows neither.
      expect(queue?.jobs[0]?.data).toMatchObject({ command: 'echo hi', env: { TOKEN: '***' } })
      expect(text).not.toContain(SECRET)
      expect(text).not.toContain('hunter2')
    },
  )

  boardTest('read-only: the dashboard API refuses to pause the queue', async ({ board }) => {
    const res = await board.app.request('/admin/queues/api/queues/sbx-exec/pause', {
      method: 'PUT',
      ...bearer(ADMIN),
    })
    expect(res.status).toBe(405)
    expect(await board.producer.isPaused()).toBe(false)
  })

  boardTest(
    '?key= once over a listening server: opaque HttpOnly cookie, key stripped, then the UI works',
    async ({ board }) => {
      const server = serve({ fetch: board.app.fetch, port: 0, hostname: '127.0.0.1' })
      await new Promise<void>((resolve, reject) => {
        server.once('listening', resolve)
        server.once('error', reject)
      })
      const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
      try {
        const login = await fetch(`${base}/admin/queues/queue/sbx-exec?key=${ADMIN}&status=waiting`, {
          redirect: 'manual',
        })
        expect(login.status).toBe(303)
        expect(login.headers.get('location')).toBe('/admin/queues/queue/sbx-exec?status=waiting')
        const { pair, attrs } = sessionCookie(login)
        expect(pair).not.toContain(ADMIN)
        expect(pair.length).toBeGreaterThan(`${ADMIN_SESSION_COOKIE}=`.length + 40)
        expect(attrs).toMatch(/HttpOnly/)
        expect(attrs).toMatch(/SameSite=Strict/)
        expect(attrs).toMatch(/Path=\/admin\/queues(;|$)/)
        expect(attrs).not.toMatch(/Secure/)

        const cookie = { headers: { cookie: pair } }
        const page = await fetch(`${base}${login.headers.get('location') ?? ''}`, cookie)
        expect(page.status).toBe(200)
        const html = await page.text()
        const script = /src="(static\/js\/main\.[^"]+\.js)"/.exec(html)?.[1]
        expect(script).toBeDefined()
        const asset = await fetch(`${base}/admin/queues/${script ?? ''}`, cookie)
        expect(asset.status).toBe(200)
        expect(asset.headers.get('content-type')).toContain('javascript')
        await asset.arrayBuffer()
        expect((await fetch(`${base}/admin/queues/${script ?? ''}`)).status).toBe(401)

        const api = await fetch(`${base}/admin/queues/api/queues?activeQueue=sbx-exec&status=waiting`, cookie)
        expect(api.status).toBe(200)
        expect(api.headers.get('cache-control')).toBe('no-store')
        const body = (await api.json()) as { queues: { name: string; jobs: { id: string }[] }[] }
        expect(body.queues.map((q) => q.name).sort()).toEqual(['sbx-agent-runs', 'sbx-exec'])
        const exec = body.queues.find((q) => q.name === 'sbx-exec')
        expect(exec?.jobs.map((j) => j.id)).toEqual([board.jobId])
      } finally {
        await new Promise<void>((resolve) => server.close(() => resolve()))
      }
    },
  )

  boardTest('a session ends after sessionTtlMs; ?key= on the JSON API is not a login', async ({ board }) => {
    const login = await board.app.request(`/admin/queues?key=${ADMIN}`)
    expect(login.status).toBe(303)
    const cookie = { headers: { cookie: sessionCookie(login).pair } }
    expect((await board.app.request('/admin/queues/api/queues', cookie)).status).toBe(200)
    board.clock.now += 60_001
    const expired = await board.app.request('/admin/queues/api/queues', cookie)
    expect(expired.status).toBe(401)
    expect(((await expired.json()) as { error: { message: string } }).error.message).toContain('expired')

    const apiWithKey = await board.app.request(`/admin/queues/api/queues?key=${ADMIN}`)
    expect(apiWithKey.status).toBe(401)
    expect(apiWithKey.headers.getSetCookie()).toEqual([])
  })

  boardTest('a trailing slash redirects to the entry page (after auth)', async ({ board }) => {
    expect((await board.app.request('/admin/queues/')).status).toBe(401)
    const res = await board.app.request('/admin/queues/', bearer(ADMIN))
    expect(res.status).toBe(308)
    expect(res.headers.get('location')).toBe('/admin/queues')
  })
})
