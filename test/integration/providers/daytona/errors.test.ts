import { randomUUID } from 'node:crypto'
import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { type DaytonaProvider, createDaytonaProvider } from '../../../../providers/daytona/index.js'
import { AppError } from '../../../../src/errors.js'
import { rejectionOf } from '../../../../src/sandbox/conformance/io-cases.js'
import { resolveProfile } from '../../../../src/sandbox/profiles.js'
import type { Sandbox } from '../../../../src/sandbox/types.js'
import { type FakeDaytona, startFakeDaytona } from '../../../fakes/daytona/index.js'
import { closeProvidersAndFake } from '../../../support/daytona-cleanup.js'

const TIMEOUT = 120_000
const profile = resolveProfile('errors', { provider: 'daytona' })
const base = { timeoutMs: 20_000, outputCapBytes: 64 * 1024 }

let fake: FakeDaytona
const providers: DaytonaProvider[] = []
const provider = (overrides: Partial<Parameters<typeof createDaytonaProvider>[0]> = {}): DaytonaProvider => {
  const p = createDaytonaProvider({ apiKey: fake.apiKey, apiUrl: fake.apiUrl, ...overrides })
  providers.push(p)
  return p
}

/** Everything an error exposes (message, stack, cause chain, JSON) must be free of `secret`. */
function expectNoSecret(err: unknown, secret: string): void {
  let current: unknown = err
  for (let depth = 0; current !== undefined && depth < 10; depth++) {
    const e = current as { message?: unknown; stack?: unknown; cause?: unknown }
    const text = `${String(e.message)}\n${String(e.stack)}\n${String(current)}\n${JSON.stringify(current) ?? ''}`
    expect(text).not.toContain(secret)
    current = e.cause
  }
}

/** Polls `check` every 20 ms until it holds (10 s at most). */
async function until(check: () => boolean): Promise<void> {
  const deadline = Date.now() + 10_000
  while (!check()) {
    if (Date.now() > deadline) throw new Error('condition not met within 10 s')
    await new Promise((resolve) => setTimeout(resolve, 20))
  }
}

beforeAll(async () => {
  fake = await startFakeDaytona()
})
afterAll(() => closeProvidersAndFake(providers, fake), TIMEOUT)

describe('Daytona provider errors (real SDK against the fake)', () => {
  test(
    '429 on create: retryable SANDBOX_CREATE_FAILED naming the status and the wait; nothing is left behind',
    async () => {
      const p = provider()
      const before = fake.sandboxes().length
      fake.faults.rateLimitCreates(1, 9)
      const err = await rejectionOf(p.create(profile, { labels: {} }))
      expect(err).toBeInstanceOf(AppError)
      expect(err).toMatchObject({ code: 'SANDBOX_CREATE_FAILED', retryable: true })
      expect((err as Error).message).toMatch(/429/)
      expect((err as Error).message).toMatch(/retry after 9 s/)
      expect(fake.sandboxes().length).toBe(before)
      // The limit is over: the next create works.
      const sb = await p.create(profile, { labels: {} })
      expect((await sb.exec({ ...base, command: 'echo ok' })).stdout).toBe('ok\n')
      await p.destroy(sb.ref)
    },
    TIMEOUT,
  )

  test(
    '401: CONFIG_INVALID naming DAYTONA_API_KEY everywhere, and the key never appears, even when the server quotes it',
    async () => {
      const badKey = `wrong-key-${randomUUID()}`
      const p = provider({ apiKey: badKey })
      fake.faults.echoCredentialsOn401(true)
      try {
        const errors = [
          await rejectionOf(p.create(profile, { labels: {} })),
          await rejectionOf(p.list({ labels: {} })),
          await rejectionOf(p.connect({ providerId: 'daytona', id: randomUUID(), profile: 'errors' })),
          await rejectionOf(p.destroy({ providerId: 'daytona', id: randomUUID(), profile: 'errors' })),
        ]
        for (const err of errors) {
          expect(err).toMatchObject({ code: 'CONFIG_INVALID', retryable: false })
          expect((err as Error).message).toContain('DAYTONA_API_KEY')
          expectNoSecret(err, badKey)
        }
        const health = await p.health()
        expect(health.ok).toBe(false)
        expect(health.reason).toContain('DAYTONA_API_KEY')
        expect(health.reason).not.toContain(badKey)
      } finally {
        fake.faults.echoCredentialsOn401(false)
      }
    },
    TIMEOUT,
  )

  test(
    'sandbox deleted behind our back: exec, files and connect fail with SANDBOX_LOST; destroy is fine',
    async () => {
      const p = provider()
      const sb = await p.create(profile, { labels: {} })
      await sb.writeFile('kept.txt', 'x')
      await fake.faults.vanish(sb.ref.id)
      const errors = [
        await rejectionOf(sb.exec({ ...base, command: 'echo hi' })),
        await rejectionOf(sb.readFile('kept.txt')),
        await rejectionOf(sb.writeFile('new.txt', 'y')),
        await rejectionOf(p.connect(sb.ref)),
      ]
      for (const err of errors) {
        expect(err).toMatchObject({ code: 'SANDBOX_LOST' })
        expect((err as Error).message).toContain(sb.ref.id)
        expectNoSecret(err, fake.apiKey)
      }
      expect(await sb.health()).toMatchObject({ ok: false })
      await p.destroy(sb.ref)
      expect(await p.list({ labels: {} })).not.toContainEqual(expect.objectContaining({ id: sb.ref.id }))
    },
    TIMEOUT,
  )

  test(
    'sandbox stopped behind our back: exec fails with SANDBOX_LOST naming the stop; connect starts it again with its files, not its processes',
    async () => {
      const p = provider()
      const sb: Sandbox = await p.create(profile, { labels: {} })
      await sb.writeFile('state.txt', 'survives a stop')
      await sb.exec({ ...base, command: 'sleep 600 >/dev/null 2>&1 & echo $! > sleeper.pid' })
      await fake.faults.stop(sb.ref.id)
      const err = await rejectionOf(sb.exec({ ...base, command: 'echo hi' }))
      expect(err).toMatchObject({ code: 'SANDBOX_LOST' })
      expect((err as Error).message).toMatch(
        /is stopped \(Daytona stops a sandbox after \d+ min without toolbox activity/,
      )
      expect((err as Error).message).toContain('its files are kept')
      const again = await p.connect(sb.ref)
      expect((await again.exec({ ...base, command: 'cat state.txt' })).stdout).toBe('survives a stop')
      const sleeper = await again.exec({
        ...base,
        command: 'kill -0 $(cat sleeper.pid) 2>/dev/null && echo alive || echo gone',
      })
      expect(sleeper.stdout).toBe('gone\n')
      await p.destroy(sb.ref)
    },
    TIMEOUT,
  )

  test(
    'sandbox stopped while a command runs: the call fails with SANDBOX_LOST at the stop, the command does not finish',
    async () => {
      const p = provider()
      const sb = await p.create(profile, { labels: {} })
      const started = Date.now()
      const running = rejectionOf(sb.exec({ ...base, command: 'sleep 5; echo survived > survived.txt' }))
      // The command is running once the daemon holds the request.
      await until(() => fake.sandboxes().find((s) => s.id === sb.ref.id)?.openRequests === 1)
      await fake.faults.stop(sb.ref.id)
      const err = await running
      expect(err).toMatchObject({ code: 'SANDBOX_LOST' })
      expect((err as Error).message).toMatch(/is stopp(ed|ing) \(/)
      expect(Date.now() - started).toBeLessThan(5_000)
      const again = await p.connect(sb.ref)
      expect(
        (await again.exec({ ...base, command: 'cat survived.txt 2>&1 || echo never' })).stdout,
      ).toContain('never')
      await p.destroy(sb.ref)
    },
    TIMEOUT,
  )

  test(
    'a file the sandbox user may not read: BAD_REQUEST saying permission denied, never the API-key error, with either daemon error shape',
    async () => {
      const legacy = await startFakeDaytona({ daemonErrorSource: false })
      try {
        for (const f of [fake, legacy]) {
          const p = provider({ apiKey: f.apiKey, apiUrl: f.apiUrl })
          const sb = await p.create(profile, { labels: {} })
          await sb.exec({ ...base, command: 'echo secret > locked.txt; chmod 000 locked.txt' })
          const err = await rejectionOf(sb.readFile('locked.txt'))
          expect(err).toMatchObject({ code: 'BAD_REQUEST', retryable: false })
          expect((err as Error).message).toMatch(/permission denied/)
          expect((err as Error).message).not.toMatch(/API key|DAYTONA_API_KEY/)
          const write = await rejectionOf(sb.writeFile('/etc/not-mine.txt', 'x'))
          expect(write).toMatchObject({ code: 'BAD_REQUEST' })
          expect((write as Error).message).toMatch(/permission denied/)
          expect((await sb.exec({ ...base, command: 'echo still fine' })).stdout).toBe('still fine\n')
          await p.destroy(sb.ref)
        }
      } finally {
        await legacy.close()
      }
    },
    TIMEOUT,
  )

  test(
    'a create whose sandbox fails to start: retryable SANDBOX_CREATE_FAILED, and the half-made sandbox is deleted',
    async () => {
      const p = provider()
      fake.faults.failStarts(1)
      const err = await rejectionOf(p.create(profile, { labels: {} }))
      expect(err).toMatchObject({ code: 'SANDBOX_CREATE_FAILED', retryable: true })
      expect(fake.sandboxes().filter((s) => s.state === 'error')).toEqual([])
    },
    TIMEOUT,
  )

  test(
    'API unreachable: retryable errors naming the API URL without its credentials',
    async () => {
      const closed = createServer()
      await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve))
      const port = (closed.address() as AddressInfo).port
      await new Promise<void>((resolve) => closed.close(() => resolve()))
      const p = provider({ apiUrl: `http://user:hunter2@127.0.0.1:${port}/api?token=abc` })
      const listErr = await rejectionOf(p.list({ labels: {} }))
      expect(listErr).toMatchObject({ code: 'UNAVAILABLE', retryable: true })
      const createErr = await rejectionOf(p.create(profile, { labels: {} }))
      expect(createErr).toMatchObject({ code: 'SANDBOX_CREATE_FAILED', retryable: true })
      for (const err of [listErr, createErr]) {
        expect((err as Error).message).toContain(`http://127.0.0.1:${port}/api`)
        expect((err as Error).message).not.toMatch(/hunter2|token=abc/)
        expectNoSecret(err, fake.apiKey)
      }
      expect(await p.health()).toMatchObject({ ok: false })
    },
    TIMEOUT,
  )

  test(
    'bad requests are refused before reaching Daytona: env names, missing cwd, closed handles',
    async () => {
      const p = provider()
      const sb = await p.create(profile, { labels: {} })
      expect(await rejectionOf(sb.exec({ ...base, command: 'true', env: { 'A-B': '1' } }))).toMatchObject({
        code: 'BAD_REQUEST',
      })
      expect(await rejectionOf(sb.exec({ ...base, command: 'true', cwd: '/no/such/dir' }))).toMatchObject({
        code: 'BAD_REQUEST',
      })
      expect(await rejectionOf(sb.readFile('/tmp'))).toMatchObject({ code: 'BAD_REQUEST' })
      await sb.close()
      expect(await rejectionOf(sb.exec({ ...base, command: 'true' }))).toMatchObject({ code: 'BAD_REQUEST' })
      await p.destroy(sb.ref)
    },
    TIMEOUT,
  )
})
