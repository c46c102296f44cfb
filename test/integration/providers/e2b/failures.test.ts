import { createServer } from 'node:net'
import Docker from 'dockerode'
import { afterAll, describe, expect, test } from 'vitest'
import { createE2BProvider } from '../../../../providers/e2b/index.js'
import { AppError } from '../../../../src/errors.js'
import { resolveProfile } from '../../../../src/sandbox/profiles.js'
import { startE2BEndpoint } from '../../../support/e2b-endpoint.js'
import { e2bFixture, quick, rejectionOf } from '../../../support/e2b-fixture.js'

const T = 120_000
// Our E2B-compatible endpoint backed by Docker. Its recording proxy echoes a rejected key in 401
// messages (our endpoint never does), so the provider's redaction is actually exercised.
const endpoint = await startE2BEndpoint({ leakKeyInErrors: true })
const fx = e2bFixture(endpoint)
const profile = resolveProfile('test', { provider: 'e2b' })
// A second endpoint with tight quotas: one sandbox per tenant, five requests per second (burst 10:
// once the SDK has waited out a Retry-After, the create and the provider's first calls fit).
const tight = await startE2BEndpoint({ tag: 'e2btight', quotas: { maxSandboxes: 1, requestsPerSecond: 5 } })
const tightFx = e2bFixture(tight)

afterAll(async () => {
  expect(await fx.cleanup()).toBe(0)
  expect(await tightFx.cleanup()).toBe(0)
  expect(await endpoint.close()).toBe(0)
  expect(await tight.close()).toBe(0)
}, T)

/** Kills a sandbox through E2B's API, as another client of the same account would. */
async function killBehindOurBack(sandboxId: string): Promise<void> {
  const r = await fetch(`${endpoint.apiUrl}/sandboxes/${sandboxId}`, {
    method: 'DELETE',
    headers: { 'x-api-key': endpoint.apiKey },
  })
  expect(r.status).toBe(204)
}

/** Every string an error exposes: message, stack, and the same for its causes. */
function exposed(err: unknown): string {
  const parts: string[] = []
  for (let e: unknown = err, depth = 0; e instanceof Error && depth < 5; e = e.cause, depth++) {
    parts.push(e.message, e.stack ?? '', String(e))
  }
  return parts.join('\n')
}

describe('e2b provider failures', () => {
  test(
    '429 on create: a retryable SANDBOX_CREATE_FAILED that says what happened, and nothing left behind',
    async () => {
      // The tenant's one sandbox is taken: the next create is a 429 without Retry-After (E2B's
      // concurrent-sandbox limit), which the SDK does not retry.
      const filler = await tightFx.create()
      try {
        const before = await tight.sandboxIds()
        const err = await rejectionOf(tightFx.create())
        expect(err).toBeInstanceOf(AppError)
        expect(err).toMatchObject({ code: 'SANDBOX_CREATE_FAILED', retryable: true })
        expect((err as Error).message).toMatch(/rate limit|quota/i)
        expect((err as Error).message).toContain('429')
        const refused = tight.requests.filter((r) => r.path === '/v2/sandboxes' && r.status === 429)
        expect(refused.map((r) => r.headers?.['retry-after'])).toEqual([undefined])
        expect(await tight.sandboxIds()).toEqual(before)
      } finally {
        await tightFx.provider.destroy(filler.ref)
      }
    },
    T,
  )

  test(
    'a 429 with Retry-After is retried by the SDK and the create succeeds',
    async () => {
      // Empty the tenant's request bucket (5/s, burst 10): the create is then a 429 with Retry-After
      // (E2B's rate limiter), which the SDK waits out and retries.
      // A token may come back between the emptying and the create (5 per second): then the create
      // went through at once, and the bucket is emptied again for another one.
      const creates = () => tight.requests.filter((r) => r.method === 'POST' && r.path === '/v2/sandboxes')
      const list = () => fetch(`${tight.apiUrl}/v2/sandboxes`, { headers: { 'x-api-key': tight.apiKey } })
      let tried: typeof tight.requests = []
      let sb: Awaited<ReturnType<typeof tightFx.create>> | undefined
      for (let attempt = 0; attempt < 5 && tried[0]?.status !== 429; attempt++) {
        if (sb) await tightFx.provider.destroy(sb.ref)
        const before = creates().length
        while ((await list()).status !== 429);
        sb = await tightFx.create()
        tried = creates().slice(before)
      }
      if (!sb) throw new Error('no create')
      expect(tried.map((r) => r.status)).toEqual([429, 201])
      expect(Number(tried[0]?.headers?.['retry-after'])).toBeGreaterThan(0)
      expect((await sb.exec({ ...quick, command: 'echo ok' })).stdout).toBe('ok\n')
      await tightFx.provider.destroy(sb.ref)
    },
    T,
  )

  test(
    '401: CONFIG_INVALID naming E2B_API_KEY, not retryable, and the key appears nowhere',
    async () => {
      const badKey = `e2b_${'0123456789abcdef'.repeat(2)}deadbeef`
      const bad = createE2BProvider({
        apiKey: badKey,
        apiUrl: endpoint.apiUrl,
        sandboxUrl: endpoint.sandboxUrl,
      })
      const errors = [
        await rejectionOf(bad.create(profile, { labels: fx.labels })),
        await rejectionOf(bad.list({ labels: fx.labels })),
        await rejectionOf(bad.connect({ providerId: 'e2b', id: 'ixyz', profile: 'test' })),
      ]
      for (const err of errors) {
        expect(err).toMatchObject({ code: 'CONFIG_INVALID', retryable: false })
        expect((err as Error).message).toContain('E2B_API_KEY')
        expect(exposed(err)).not.toContain(badKey)
      }
      const health = await bad.health()
      expect(health.ok).toBe(false)
      expect(health.reason).toContain('E2B_API_KEY')
      expect(health.reason).not.toContain(badKey)
    },
    T,
  )

  test(
    'an unknown template is a CONFIG_INVALID naming it',
    async () => {
      // The endpoint knows the templates its config maps (here only `base`).
      const err = await rejectionOf(
        fx.provider.create(resolveProfile('t', { provider: 'e2b', template: 'no-such-template' }), {
          labels: fx.labels,
        }),
      )
      expect(err).toMatchObject({ code: 'CONFIG_INVALID', retryable: false })
      expect((err as Error).message).toContain('no-such-template')
    },
    T,
  )

  test(
    'an empty API key is a CONFIG_INVALID naming E2B_API_KEY at construction',
    () => {
      expect(() => createE2BProvider({ apiKey: '' })).toThrow(/E2B_API_KEY/)
    },
    T,
  )

  test(
    'a sandbox killed behind our back: exec, files and connect fail with SANDBOX_LOST; destroy is fine',
    async () => {
      const sb = await fx.create()
      await sb.writeFile('kept.txt', 'x')
      // Killed through E2B's API by someone else (another client of the same account).
      await killBehindOurBack(sb.ref.id)
      for (const op of [
        () => sb.exec({ ...quick, command: 'echo hi' }),
        () => sb.readFile('kept.txt'),
        () => sb.writeFile('new.txt', 'y'),
        () => fx.provider.connect(sb.ref),
      ]) {
        expect(await rejectionOf(op())).toMatchObject({ code: 'SANDBOX_LOST' })
      }
      expect(await sb.health()).toMatchObject({ ok: false })
      await fx.provider.destroy(sb.ref)
      await sb.close()
    },
    T,
  )

  test(
    'a sandbox killed mid-command: the stream drops, the probe finds it gone, SANDBOX_LOST at once',
    async () => {
      const sb = await fx.create()
      let started!: () => void
      const running = new Promise<void>((resolve) => (started = resolve))
      const t0 = performance.now()
      const pending = rejectionOf(
        sb.exec(
          { ...quick, command: 'echo go; sleep 30' },
          { onStdout: (c) => c.includes('go') && started() },
        ),
      )
      await running
      await killBehindOurBack(sb.ref.id)
      // E2B drops the command's stream (it does not end it with an exit code): the provider's
      // in-flight path probes the sandbox and reports it lost, well before the command's deadline.
      expect(await pending).toMatchObject({ code: 'SANDBOX_LOST', retryable: false })
      expect(performance.now() - t0).toBeLessThan(quick.timeoutMs)
      const start = endpoint.requests.findLast(
        (r) => r.sandboxId === sb.ref.id && r.path === '/process.Process/Start',
      )
      expect(start?.status).toBe(200)
      await sb.close()
    },
    T,
  )

  test(
    'unreachable API: retryable errors naming the URL',
    async () => {
      // A port that was free a moment ago: nothing listens there.
      const port = await new Promise<number>((resolve) => {
        const srv = createServer().listen(0, '127.0.0.1', () => {
          const p = (srv.address() as { port: number }).port
          srv.close(() => resolve(p))
        })
      })
      const url = `http://127.0.0.1:${port}`
      const down = createE2BProvider({ apiKey: endpoint.apiKey, apiUrl: url, sandboxUrl: url, retries: 0 })
      const created = await rejectionOf(down.create(profile, { labels: fx.labels }))
      expect(created).toMatchObject({ code: 'SANDBOX_CREATE_FAILED', retryable: true })
      expect((created as Error).message).toContain(url)
      const listed = await rejectionOf(down.list({ labels: fx.labels }))
      expect(listed).toMatchObject({ code: 'UNAVAILABLE', retryable: true })
      expect((listed as Error).message).toContain(url)
      expect((listed as Error).message).toContain('ECONNREFUSED')
      expect(await down.health()).toMatchObject({ ok: false })
      // API reachable, envd not: the sandbox is created, cannot be prepared, and is killed again.
      const before = await endpoint.sandboxIds()
      const noEnvd = createE2BProvider({ apiKey: endpoint.apiKey, apiUrl: endpoint.apiUrl, sandboxUrl: url })
      const prepared = await rejectionOf(noEnvd.create(profile, { labels: fx.labels }))
      expect(prepared).toMatchObject({ code: 'SANDBOX_CREATE_FAILED', retryable: true })
      expect((prepared as Error).message).toContain(url)
      expect(await endpoint.sandboxIds()).toEqual(before)
    },
    T,
  )

  test(
    'a stuck sandbox: past the timeout plus the deadline buffer, a retryable SANDBOX_TIMEOUT',
    async () => {
      const impatient = e2bFixture(endpoint, { commandDeadlineBufferMs: 1500 })
      const sb = await impatient.create()
      const container = await endpoint.containerOf(sb.ref.id)
      expect(container).toBeTruthy()
      const c = new Docker().getContainer(container ?? '')
      let started!: () => void
      const running = new Promise<void>((resolve) => (started = resolve))
      const pending = sb.exec(
        { ...quick, timeoutMs: 1000, command: 'echo go; sleep 30' },
        { onStdout: (chunk) => chunk.includes('go') && started() },
      )
      await running
      // Frozen: the in-sandbox timeout cannot fire, so only the SDK's stream deadline ends the call.
      await c.pause()
      try {
        expect(await rejectionOf(pending)).toMatchObject({ code: 'SANDBOX_TIMEOUT', retryable: true })
      } finally {
        await c.unpause()
      }
      expect((await sb.exec({ ...quick, command: 'echo alive' })).stdout).toBe('alive\n')
      expect(await impatient.cleanup()).toBe(0)
    },
    T,
  )
})
