/*
 * Daytona's lifetimes and failures, as a session on `sbx serve` meets them: the local Daytona fake
 * enforces auto-stop / auto-delete (one of its minutes lasts MINUTE_MS), a stop kills what runs,
 * and an unreadable file answers 403 FILE_ACCESS_DENIED; the service speaks only HTTP here.
 */
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { type FakeDaytona, startFakeDaytona } from '../fakes/daytona/index.js'
import { type LiveService, startLiveService } from '../support/live-service.js'

const KEY = 'daytona-lifetimes-key-0123456789'
const prefix = `e2edl${process.pid}${Date.now().toString(36)}`
/** One Daytona minute in the fake: above the SDK's 1 s state polls, short enough for a test. */
const MINUTE_MS = 2_500
const profile = 'remote-daytona'

interface Job {
  state: string
  result?: {
    stdout: string
    sandboxId: string
    sandboxReplaced?: { reason: string; filesLost: boolean; previousSandboxId?: string }
  }
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
      // The pool keeps an idle session far longer than Daytona's auto-stop (1 fake minute).
      profiles: { [profile]: { provider: 'daytona', snapshot: 'sbx-test', idleTtlMs: 600_000 } },
      providers: {
        daytona: { autoStopMinutes: 1, autoDeleteMinutes: 0, agentBinaryPath: '/nonexistent/sbx-agent' },
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

async function openSession(id: string): Promise<void> {
  const r = await api('/v1/sessions', {
    method: 'POST',
    body: JSON.stringify({ id, provider: 'daytona', profile }),
  })
  expect(r.status, await r.clone().text()).toBe(201)
}

async function exec(sessionId: string, command: string): Promise<Job> {
  const r = await api('/v1/exec', {
    method: 'POST',
    body: JSON.stringify({ provider: 'daytona', profile, sessionId, command }),
  })
  return (await r.json()) as Job
}

/** Polls the fake until `check` holds for the sandbox (30 s at most). */
async function until(
  sandboxId: string,
  what: string,
  check: (state: string, open: number) => boolean,
): Promise<void> {
  const deadline = Date.now() + 30_000
  for (;;) {
    const s = daytona.sandboxes().find((x) => x.id === sandboxId)
    if (s && check(s.state, s.openRequests)) return
    if (Date.now() > deadline) throw new Error(`sandbox ${sandboxId} never ${what} (${s?.state})`)
    await new Promise((resolve) => setTimeout(resolve, 25))
  }
}

describe('a Daytona session on sbx serve', () => {
  test('auto-deleted while the session idles: the next call fails SANDBOX_LOST saying so, the one after runs in a fresh sandbox', async () => {
    await openSession('s-idle')
    const first = await exec('s-idle', 'echo kept > f; cat f')
    expect(first.state, JSON.stringify(first)).toBe('completed')
    const lostId = first.result?.sandboxId ?? ''
    // Daytona's auto-stop of an ephemeral sandbox (autoDeleteMinutes 0) deletes it.
    await until(lostId, 'destroyed', (state) => state === 'destroyed')
    expect(daytona.sandboxes().find((s) => s.id === lostId)?.history).not.toContain('stopped')
    const failed = await exec('s-idle', 'cat f')
    expect(failed.state, JSON.stringify(failed)).toBe('failed')
    expect(failed.error?.code).toBe('SANDBOX_LOST')
    expect(failed.error?.message).toContain(lostId)
    expect(failed.error?.message).toMatch(/auto-delete 0 as soon as it stops/)
    expect(failed.error?.message).toContain("the session's next call runs in a fresh, empty sandbox")
    const next = await exec('s-idle', 'cat f 2>/dev/null || echo gone')
    expect(next.state, JSON.stringify(next)).toBe('completed')
    expect(next.result?.stdout).toBe('gone\n')
    expect(next.result?.sandboxId).not.toBe(lostId)
    expect(next.result?.sandboxReplaced).toMatchObject({ filesLost: true, previousSandboxId: lostId })
  }, 120_000)

  test('stopped while a command runs: that call is SANDBOX_LOST naming the stop, the command never finishes, the next call rebinds', async () => {
    await openSession('s-stop')
    const warm = await exec('s-stop', 'echo warm')
    expect(warm.state, JSON.stringify(warm)).toBe('completed')
    const id = warm.result?.sandboxId ?? ''
    const pending = exec('s-stop', 'sleep 8; echo finished')
    await until(id, 'ran a command', (_state, open) => open > 0)
    await daytona.faults.stop(id)
    const lost = await pending
    expect(lost.state, JSON.stringify(lost)).toBe('failed')
    expect(lost.error?.code).toBe('SANDBOX_LOST')
    expect(lost.error?.message).toMatch(
      new RegExp(`${id} is stopp(ed|ing) \\(Daytona stops a sandbox after 1 min`),
    )
    expect(lost.error?.message).toContain('may have run partly')
    const next = await exec('s-stop', 'echo again')
    expect(next.state, JSON.stringify(next)).toBe('completed')
    expect(next.result?.sandboxReplaced).toMatchObject({ filesLost: true, previousSandboxId: id })
  }, 120_000)

  test('a file the sandbox user may not read: 400 BAD_REQUEST saying permission denied, not a key or server error', async () => {
    await openSession('s-perm')
    const made = await exec('s-perm', 'echo secret > locked.txt; chmod 000 locked.txt')
    expect(made.state, JSON.stringify(made)).toBe('completed')
    const r = await api('/v1/sessions/s-perm/files?path=locked.txt')
    const body = (await r.json()) as { error: { code: string; message: string } }
    expect(r.status, JSON.stringify(body)).toBe(400)
    expect(body.error.code).toBe('BAD_REQUEST')
    expect(body.error.message).toMatch(/permission denied/)
    expect(body.error.message).not.toMatch(/API key|DAYTONA_API_KEY/)
    const ready = (await (await api('/readyz')).json()) as { checks: Record<string, { ok: boolean }> }
    expect(ready.checks.daytona?.ok).toBe(true)
  }, 120_000)
})
