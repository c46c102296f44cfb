import {
  type CreateSandboxFromSnapshotParams,
  Daytona,
  DaytonaAuthorizationError,
  DaytonaError,
  DaytonaFileAccessDeniedError,
  DaytonaNotFoundError,
  DaytonaValidationError,
  type Sandbox as RemoteSandbox,
} from '@daytonaio/sdk'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { rejectionOf } from '../../../../src/sandbox/conformance/io-cases.js'
import { type FakeDaytona, type FakeSandboxView, startFakeDaytona } from '../../../fakes/daytona/index.js'

// The fake's lifecycle through the bare SDK, with a Daytona minute lasting MINUTE_MS.
const TIMEOUT = 90_000
const MINUTE_MS = 600
let fake: FakeDaytona
let legacy: FakeDaytona
let daytona: Daytona
const made: RemoteSandbox[] = []

const view = (id: string): FakeSandboxView => {
  const found = fake.sandboxes().find((s) => s.id === id)
  if (!found) throw new Error(`the fake has no sandbox ${id}`)
  return found
}

/** Polls until the fake reports `state` for the sandbox (20 s at most). */
async function reaches(id: string, state: string): Promise<number> {
  const deadline = Date.now() + 20_000
  while (view(id).state !== state) {
    if (Date.now() > deadline) throw new Error(`sandbox ${id} is ${view(id).state}, never ${state}`)
    await new Promise((resolve) => setTimeout(resolve, 20))
  }
  return Date.now()
}

async function create(
  params: CreateSandboxFromSnapshotParams = {},
  client = daytona,
): Promise<RemoteSandbox> {
  const sb = await client.create({ labels: { 'sandbox-router.test': 'fake-lifecycle' }, ...params })
  made.push(sb)
  return sb
}

beforeAll(async () => {
  ;[fake, legacy] = await Promise.all([
    startFakeDaytona({ minuteMs: MINUTE_MS }),
    startFakeDaytona({ daemonErrorSource: false }),
  ])
  daytona = new Daytona({
    apiKey: fake.apiKey,
    apiUrl: fake.apiUrl,
    target: 'us',
    useDeprecatedPolling: true,
  })
}, TIMEOUT)
afterAll(async () => {
  for (const sb of made) await sb.delete().catch(() => undefined)
  await daytona?.[Symbol.asyncDispose]()
  await Promise.all([fake?.close(), legacy?.close()])
}, TIMEOUT)

describe('fake Daytona lifecycle', () => {
  test(
    'create answers a transient state and the SDK waits: creating → started; an image builds first (pending_build)',
    async () => {
      const raw = await fetch(`${fake.apiUrl}/sandbox`, {
        method: 'POST',
        headers: { authorization: `Bearer ${fake.apiKey}`, 'content-type': 'application/json' },
        body: JSON.stringify({ labels: { 'sandbox-router.test': 'fake-lifecycle' } }),
      })
      const answered = (await raw.json()) as { id: string; state: string }
      expect(answered.state).toBe('creating')
      await reaches(answered.id, 'started')
      made.push(await daytona.get(answered.id))
      const fromSnapshot = await create()
      expect(fromSnapshot.state).toBe('started')
      expect(view(fromSnapshot.id).history).toEqual(['creating', 'started'])
      const fromImage = await daytona.create({ image: 'sandbox-router/base:latest' })
      made.push(fromImage)
      expect(fromImage.state).toBe('started')
      expect(view(fromImage.id).history).toEqual(['pending_build', 'creating', 'started'])
    },
    TIMEOUT,
  )

  test(
    'a stop ends what runs: the request in flight answers 502, processes and sessions die, files stay; start brings it back',
    async () => {
      const sb = await create({ autoStopInterval: 0 })
      await sb.fs.uploadFile(Buffer.from('kept'), '/workspace/kept.txt')
      await sb.process.executeCommand('sleep 600 >/dev/null 2>&1 & echo $! > /workspace/sleeper.pid')
      await sb.process.createSession('s1')
      const inFlight = rejectionOf(sb.process.executeCommand('sleep 20; echo done'))
      const deadline = Date.now() + 10_000
      while (view(sb.id).openRequests === 0 && Date.now() < deadline)
        await new Promise((resolve) => setTimeout(resolve, 20))
      await sb.stop()
      const err = await inFlight
      expect(err).toBeInstanceOf(DaytonaError)
      expect((err as DaytonaError).statusCode).toBe(502)
      expect(view(sb.id).history.slice(-3)).toEqual(['started', 'stopping', 'stopped'])
      // Not started: the runner finds no container address.
      const refused = await rejectionOf(sb.process.executeCommand('true'))
      expect(refused).toBeInstanceOf(DaytonaValidationError)
      await sb.start()
      expect(view(sb.id).history.slice(-2)).toEqual(['starting', 'started'])
      expect(Buffer.from(await sb.fs.downloadFile('/workspace/kept.txt')).toString()).toBe('kept')
      const sleeper = await sb.process.executeCommand(
        'kill -0 $(cat /workspace/sleeper.pid) 2>/dev/null && echo alive || echo gone',
      )
      expect(sleeper.result).toBe('gone\n')
      expect(await rejectionOf(sb.process.getSession('s1'))).toBeInstanceOf(DaytonaNotFoundError)
    },
    TIMEOUT,
  )

  test(
    'auto-stop after autoStopInterval minutes without activity, then auto-delete counted from the last activity',
    async () => {
      const sb = await create({ autoStopInterval: 1, autoDeleteInterval: 3 })
      await sb.process.executeCommand('true')
      const lastActivity = view(sb.id).lastActivityAt
      const stopped = await reaches(sb.id, 'stopped')
      expect(stopped - lastActivity).toBeGreaterThanOrEqual(MINUTE_MS)
      const destroyed = await reaches(sb.id, 'destroyed')
      expect(destroyed - lastActivity).toBeGreaterThanOrEqual(3 * MINUTE_MS)
      expect(view(sb.id).history).toEqual([
        'creating',
        'started',
        'stopping',
        'stopped',
        'destroying',
        'destroyed',
      ])
      expect(fake.containers()).not.toContain(view(sb.id).containerId)
    },
    TIMEOUT,
  )

  test(
    'autoDeleteInterval 0 (ephemeral): deleted instead of stopped',
    async () => {
      const sb = await create({ autoStopInterval: 1, autoDeleteInterval: 0 })
      await reaches(sb.id, 'destroyed')
      expect(view(sb.id).history).toEqual(['creating', 'started', 'destroying', 'destroyed'])
    },
    TIMEOUT,
  )

  test(
    'activity holds auto-stop off: a toolbox request longer than the interval, and requests in a row',
    async () => {
      const sb = await create({ autoStopInterval: 1, autoDeleteInterval: 0 })
      await sb.process.executeCommand(`sleep ${(2.5 * MINUTE_MS) / 1000}`)
      for (let i = 0; i < 4; i++) {
        await new Promise((resolve) => setTimeout(resolve, MINUTE_MS / 2))
        await sb.process.executeCommand('true')
      }
      expect(view(sb.id).state).toBe('started')
      expect(view(sb.id).history).toEqual(['creating', 'started'])
    },
    TIMEOUT,
  )

  test(
    'auto-archive of a stopped sandbox; a start restores it with its files',
    async () => {
      const sb = await create({ autoStopInterval: 1, autoArchiveInterval: 2, autoDeleteInterval: -1 })
      await sb.fs.uploadFile(Buffer.from('archived'), '/workspace/a.txt')
      await reaches(sb.id, 'archived')
      await sb.start()
      expect(view(sb.id).history.slice(-4)).toEqual(['archiving', 'archived', 'restoring', 'started'])
      expect(Buffer.from(await sb.fs.downloadFile('/workspace/a.txt')).toString()).toBe('archived')
    },
    TIMEOUT,
  )

  test(
    'ttlMinutes destroys a sandbox in use, counted from its creation',
    async () => {
      // 10 fake minutes (6 s): the create (a container start, 1–3 s on a loaded machine) must end,
      // and the SDK's state poll see it started, well before the ttl; 2 minutes raced both.
      const sb = await create({ autoStopInterval: 0, ttlMinutes: 10 })
      const created = Date.parse(String(view(sb.id).createdAt))
      const deadline = Date.now() + 30_000
      while (view(sb.id).state === 'started' && Date.now() < deadline)
        await sb.process.executeCommand('true').catch(() => undefined)
      const gone = await reaches(sb.id, 'destroyed')
      expect(gone - created).toBeGreaterThanOrEqual(10 * MINUTE_MS)
    },
    TIMEOUT,
  )

  test(
    'a file the sandbox user may not read: 403 FILE_ACCESS_DENIED, with the daemon source (current) or without (v0.190.0)',
    async () => {
      const current = await create({ autoStopInterval: 0 })
      const legacyClient = new Daytona({
        apiKey: legacy.apiKey,
        apiUrl: legacy.apiUrl,
        useDeprecatedPolling: true,
      })
      try {
        const old = await create({}, legacyClient)
        for (const sb of [current, old]) {
          await sb.process.executeCommand('echo x > /workspace/locked; chmod 000 /workspace/locked')
        }
        const err = await rejectionOf(current.fs.downloadFile('/workspace/locked'))
        expect(err).toBeInstanceOf(DaytonaFileAccessDeniedError)
        expect(err).toMatchObject({ statusCode: 403, code: 'FILE_ACCESS_DENIED', source: 'DAYTONA_DAEMON' })
        expect((err as Error).message).toBe('permission denied: /workspace/locked')
        const oldErr = await rejectionOf(old.fs.downloadFile('/workspace/locked'))
        expect(oldErr).toBeInstanceOf(DaytonaAuthorizationError)
        expect(oldErr).not.toBeInstanceOf(DaytonaFileAccessDeniedError)
        expect(oldErr).toMatchObject({ statusCode: 403, code: 'FILE_ACCESS_DENIED' })
        await old.delete()
      } finally {
        await legacyClient[Symbol.asyncDispose]()
      }
    },
    TIMEOUT,
  )
})
