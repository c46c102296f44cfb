/*
 * Daytona's auto-stop without auto-delete, as a session on `sbx serve` meets it: the sandbox is
 * stopped while the session idles, and the session's next call starts it again (files kept) instead
 * of failing, because `providers.daytona.stateCheckIdleMs` makes the adapter look first. The local
 * Daytona fake enforces auto-stop (one of its minutes lasts MINUTE_MS).
 */
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { type FakeDaytona, startFakeDaytona } from '../fakes/daytona/index.js'
import { type LiveService, startLiveService } from '../support/live-service.js'

const KEY = 'daytona-restart-key-0123456789ab'
const prefix = `e2edr${process.pid}${Date.now().toString(36)}`
/** One Daytona minute in the fake: above the SDK's 1 s state polls, short enough for a test. */
const MINUTE_MS = 2_500
const profile = 'remote-daytona'
const warmProfile = 'warm-daytona'

interface Job {
  state: string
  result?: { stdout: string; sandboxId: string; sandboxReplaced?: unknown }
  error?: { code: string; message: string }
}

let daytona: FakeDaytona
let live: LiveService

beforeAll(async () => {
  daytona = await startFakeDaytona({ minuteMs: MINUTE_MS })
  live = await startLiveService({
    prefix,
    keys: [{ key: KEY, tenant: 'acme' }],
    config: {
      profiles: {
        [profile]: { provider: 'daytona', snapshot: 'sbx-test', idleTtlMs: 600_000 },
        // One warm sandbox kept ready for new sessions.
        [warmProfile]: {
          provider: 'daytona',
          snapshot: 'sbx-test',
          idleTtlMs: 600_000,
          pool: { minIdle: 1 },
        },
      },
      providers: {
        daytona: {
          // Stopped after one (fake) minute idle, deleted an hour after that: a restart keeps files.
          autoStopMinutes: 1,
          autoDeleteMinutes: 60,
          // The adapter counts real minutes; the fake's are shorter, so look after one second idle.
          stateCheckIdleMs: 1_000,
          agentBinaryPath: '/nonexistent/sbx-agent',
        },
      },
    },
    env: { DAYTONA_API_KEY: daytona.apiKey, DAYTONA_API_URL: daytona.apiUrl },
  })
}, 120_000)

afterAll(async () => {
  await live?.close()
  expect(daytona.containers()).toEqual([])
  await daytona?.close()
}, 120_000)

function api(path: string, init: RequestInit = {}): Promise<Response> {
  const headers = new Headers(init.headers)
  headers.set('authorization', `Bearer ${KEY}`)
  if (init.body && !headers.has('content-type')) headers.set('content-type', 'application/json')
  return fetch(`${live.server.url}${path}`, { ...init, headers })
}

async function exec(sessionId: string, command: string, onProfile = profile): Promise<Job> {
  const r = await api('/v1/exec', {
    method: 'POST',
    body: JSON.stringify({ provider: 'daytona', profile: onProfile, sessionId, command }),
  })
  return (await r.json()) as Job
}

/** Polls the fake until a sandbox `pick` finds is in `state` (30 s at most); resolves with its id. */
async function until(
  pick: string | ((s: ReturnType<FakeDaytona['sandboxes']>[number]) => boolean),
  state: string,
): Promise<string> {
  const match = typeof pick === 'string' ? (s: { id: string }) => s.id === pick : pick
  const deadline = Date.now() + 30_000
  for (;;) {
    const s = daytona.sandboxes().find((x) => match(x) && x.state === state)
    if (s) return s.id
    if (Date.now() > deadline) throw new Error(`no sandbox ${String(pick)} ever ${state}`)
    await new Promise((resolve) => setTimeout(resolve, 25))
  }
}

describe('a Daytona session on sbx serve with providers.daytona.stateCheckIdleMs', () => {
  test('auto-stopped while the session idles: the next call starts it again, files kept, same sandbox', async () => {
    const opened = await api('/v1/sessions', {
      method: 'POST',
      body: JSON.stringify({ id: 's-restart', provider: 'daytona', profile }),
    })
    expect(opened.status, await opened.clone().text()).toBe(201)
    const first = await exec('s-restart', 'echo kept > f; cat f')
    expect(first.state, JSON.stringify(first)).toBe('completed')
    const id = first.result?.sandboxId ?? ''
    await until(id, 'stopped')
    const next = await exec('s-restart', 'cat f')
    expect(next.state, JSON.stringify(next)).toBe('completed')
    expect(next.result).toMatchObject({ stdout: 'kept\n', sandboxId: id })
    expect(next.result?.sandboxReplaced).toBeUndefined()
    const s = daytona.sandboxes().find((x) => x.id === id)
    expect(s?.state).toBe('started')
    expect(s?.history).toContain('stopped')
  }, 120_000)

  test('a warm sandbox auto-stopped while it waited: the session that claims it starts it again first', async () => {
    // The profile's first use starts its warm pool: one more sandbox, unbound, labelled warm.
    const first = await exec('s-warm-1', 'echo one', warmProfile)
    expect(first.state, JSON.stringify(first)).toBe('completed')
    const isWarm = (s: { id: string; labels: Record<string, string> }): boolean =>
      s.labels['sandbox-router.profile'] === warmProfile && s.id !== first.result?.sandboxId
    const warmId = await until(isWarm, 'stopped')
    // The claim looks before the call (ready()): the stopped warm sandbox is started and used.
    const second = await exec('s-warm-2', 'echo two', warmProfile)
    expect(second.state, JSON.stringify(second)).toBe('completed')
    expect(second.result).toMatchObject({ stdout: 'two\n', sandboxId: warmId })
    expect(daytona.sandboxes().find((x) => x.id === warmId)?.history).toContain('stopped')
  }, 120_000)
})
