import { createServer } from 'node:net'
import Docker from 'dockerode'
import { afterAll, describe, expect, test } from 'vitest'
import { createE2BProvider } from '../../../providers/e2b/index.js'
import { AppError } from '../../../src/errors.js'
import { resolveProfile } from '../../../src/sandbox/profiles.js'
import { startFakeE2B } from '../../fakes/e2b/index.js'
import { e2bFixture, quick, rejectionOf } from './fixtures.js'

const T = 120_000
// The fake echoes a rejected key in its 401 messages, so redaction is actually exercised.
const fake = await startFakeE2B({ leakKeyInErrors: true })
const fx = e2bFixture(fake)
const profile = resolveProfile('test', { provider: 'e2b' })

afterAll(async () => {
  expect(await fx.cleanup()).toBe(0)
  await fake.close()
  expect(await fake.containers()).toEqual([])
}, T)

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
      const before = fake.sandboxes().length
      fake.faults.failNextCreates(1)
      const err = await rejectionOf(fx.create())
      expect(err).toBeInstanceOf(AppError)
      expect(err).toMatchObject({ code: 'SANDBOX_CREATE_FAILED', retryable: true })
      expect((err as Error).message).toMatch(/rate limit|quota/i)
      expect((err as Error).message).toContain('429')
      expect(fake.sandboxes().length).toBe(before)
    },
    T,
  )

  test(
    'a 429 with Retry-After is retried by the SDK and the create succeeds',
    async () => {
      fake.faults.failNextCreates(1, { retryAfterS: 0 })
      const sb = await fx.create()
      expect((await sb.exec({ ...quick, command: 'echo ok' })).stdout).toBe('ok\n')
    },
    T,
  )

  test(
    '401: CONFIG_INVALID naming E2B_API_KEY, not retryable, and the key appears nowhere',
    async () => {
      const badKey = `e2b_${'0123456789abcdef'.repeat(2)}deadbeef`
      const bad = createE2BProvider({ apiKey: badKey, apiUrl: fake.apiUrl, sandboxUrl: fake.sandboxUrl })
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
      const strict = await startFakeE2B({ templates: ['base'], apiKey: fake.apiKey })
      try {
        const p = createE2BProvider({
          apiKey: strict.apiKey,
          apiUrl: strict.apiUrl,
          sandboxUrl: strict.sandboxUrl,
        })
        const err = await rejectionOf(
          p.create(resolveProfile('t', { provider: 'e2b', template: 'no-such-template' }), {
            labels: fx.labels,
          }),
        )
        expect(err).toMatchObject({ code: 'CONFIG_INVALID', retryable: false })
        expect((err as Error).message).toContain('no-such-template')
      } finally {
        await strict.close()
      }
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
      await fake.faults.vanish(sb.ref.id)
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
      const down = createE2BProvider({ apiKey: fake.apiKey, apiUrl: url, sandboxUrl: url, retries: 0 })
      const created = await rejectionOf(down.create(profile, { labels: fx.labels }))
      expect(created).toMatchObject({ code: 'SANDBOX_CREATE_FAILED', retryable: true })
      expect((created as Error).message).toContain(url)
      const listed = await rejectionOf(down.list({ labels: fx.labels }))
      expect(listed).toMatchObject({ code: 'UNAVAILABLE', retryable: true })
      expect((listed as Error).message).toContain(url)
      expect((listed as Error).message).toContain('ECONNREFUSED')
      expect(await down.health()).toMatchObject({ ok: false })
      // API reachable, envd not: the sandbox is created, cannot be prepared, and is killed again.
      const before = fake.sandboxes().filter((s) => s.state !== 'killed').length
      const noEnvd = createE2BProvider({ apiKey: fake.apiKey, apiUrl: fake.apiUrl, sandboxUrl: url })
      const prepared = await rejectionOf(noEnvd.create(profile, { labels: fx.labels }))
      expect(prepared).toMatchObject({ code: 'SANDBOX_CREATE_FAILED', retryable: true })
      expect((prepared as Error).message).toContain(url)
      expect(fake.sandboxes().filter((s) => s.state !== 'killed').length).toBe(before)
    },
    T,
  )

  test(
    'a stuck sandbox: past the timeout plus the deadline buffer, a retryable SANDBOX_TIMEOUT',
    async () => {
      const impatient = e2bFixture(fake, { commandDeadlineBufferMs: 1500 })
      const sb = await impatient.create()
      const container = fake.sandbox(sb.ref.id)?.containerId
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
