import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { type DaytonaProvider, createDaytonaProvider } from '../../../../providers/daytona/index.js'
import { rejectionOf } from '../../../../src/sandbox/conformance/io-cases.js'
import { resolveProfile } from '../../../../src/sandbox/profiles.js'
import type { Sandbox } from '../../../../src/sandbox/types.js'
import { type FakeDaytona, startFakeDaytona } from '../../../fakes/daytona/index.js'
import { closeProvidersAndFake } from '../../../support/daytona-cleanup.js'

// Daytona's lifetimes met by the provider: the fake enforces them, a Daytona minute lasting MINUTE_MS
// (longer than the SDK's 1 s state polls, so a create is not auto-stopped before the SDK sees it started).
const TIMEOUT = 90_000
const MINUTE_MS = 2_500
const profile = resolveProfile('lifetimes', { provider: 'daytona', idleTtlMs: 60_000 })
const base = { timeoutMs: 20_000, outputCapBytes: 64 * 1024 }

let fake: FakeDaytona
const providers: DaytonaProvider[] = []
const provider = (overrides: Partial<Parameters<typeof createDaytonaProvider>[0]> = {}): DaytonaProvider => {
  const p = createDaytonaProvider({
    apiKey: fake.apiKey,
    apiUrl: fake.apiUrl,
    autoStopMinutes: 1,
    ...overrides,
  })
  providers.push(p)
  return p
}
const stateOf = (id: string): string | undefined => fake.sandboxes().find((s) => s.id === id)?.state

/** Polls until the fake reports `state` for the sandbox (20 s at most). */
async function reaches(id: string, state: string): Promise<void> {
  const deadline = Date.now() + 20_000
  while (stateOf(id) !== state) {
    if (Date.now() > deadline) throw new Error(`sandbox ${id} is ${stateOf(id)}, never ${state}`)
    await new Promise((resolve) => setTimeout(resolve, 20))
  }
}

beforeAll(async () => {
  fake = await startFakeDaytona({ minuteMs: MINUTE_MS })
})
afterAll(() => closeProvidersAndFake(providers, fake), TIMEOUT)

describe('Daytona lifetimes through the provider', () => {
  test(
    'auto-stopped between calls: ready() starts it again; files kept, processes and the persistent shell gone',
    async () => {
      const p = provider({ autoDeleteMinutes: 60, stateCheckIdleMs: 0 })
      const sb: Sandbox = await p.create(profile, { labels: {} })
      await sb.writeFile('notes.txt', 'kept')
      await sb.exec({ ...base, command: 'sleep 600 >/dev/null 2>&1 & echo $! > sleeper.pid' })
      expect((await sb.exec({ ...base, command: 'export KEPT=yes', shell: 'persistent' })).exitCode).toBe(0)
      await reaches(sb.ref.id, 'stopped')
      await sb.ready?.()
      expect(stateOf(sb.ref.id)).toBe('started')
      expect((await sb.exec({ ...base, command: 'cat notes.txt' })).stdout).toBe('kept')
      const sleeper = await sb.exec({
        ...base,
        command: 'kill -0 $(cat sleeper.pid) 2>/dev/null && echo alive || echo gone',
      })
      expect(sleeper.stdout).toBe('gone\n')
      const shell = await sb.exec({ ...base, command: 'echo "${KEPT:-lost}"', shell: 'persistent' })
      expect(shell).toMatchObject({ stdout: 'lost\n', shellRestarted: true })
    },
    TIMEOUT,
  )

  test(
    'auto-deleted between calls (autoDeleteMinutes 0, the default): ready() says SANDBOX_LOST before anything runs',
    async () => {
      const p = provider({ stateCheckIdleMs: 0 })
      const sb = await p.create(profile, { labels: {} })
      await reaches(sb.ref.id, 'destroyed')
      const err = await rejectionOf(sb.ready!())
      expect(err).toMatchObject({ code: 'SANDBOX_LOST' })
      expect((err as Error).message).toContain(sb.ref.id)
      expect((err as Error).message).toMatch(/auto-delete 0 as soon as it stops/)
    },
    TIMEOUT,
  )

  test(
    'stopped while a connect looks: connect waits for the stop to end, then starts it',
    async () => {
      const p = provider({ autoStopMinutes: 0, autoDeleteMinutes: 60 })
      const sb = await p.create(profile, { labels: {} })
      await sb.writeFile('notes.txt', 'kept')
      const stopping = fake.faults.stop(sb.ref.id)
      expect(stateOf(sb.ref.id)).toBe('stopping')
      const again = await p.connect(sb.ref)
      await stopping
      expect(
        fake
          .sandboxes()
          .find((s) => s.id === sb.ref.id)
          ?.history.slice(-4),
      ).toEqual(['stopping', 'stopped', 'starting', 'started'])
      expect((await again.exec({ ...base, command: 'cat notes.txt' })).stdout).toBe('kept')
    },
    TIMEOUT,
  )

  test(
    'by default a handle used within its auto-stop interval asks nothing before a call',
    async () => {
      const p = provider({ autoStopMinutes: 30 })
      const sb = await p.create(profile, { labels: {} })
      await fake.faults.stop(sb.ref.id)
      // No GET: the stop is not seen until a call fails (it could not be an auto-stop yet).
      await sb.ready?.()
      expect(stateOf(sb.ref.id)).toBe('stopped')
      expect(await rejectionOf(sb.exec({ ...base, command: 'true' }))).toMatchObject({ code: 'SANDBOX_LOST' })
    },
    TIMEOUT,
  )
})
