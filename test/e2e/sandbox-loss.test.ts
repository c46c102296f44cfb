import { execFile } from 'node:child_process'
import { promisify } from 'node:util'
import { Redis } from 'ioredis'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { deleteKeys } from '../support/redis.js'
import {
  SHARED_REDIS,
  fleetConfig,
  removeScopeContainers,
  startSbxServer,
  startSbxWorker,
  uniqueName,
} from '../support/sbx-cli.js'
import type { SbxServer } from '../support/sbx-cli.js'

/*
 * F5: losing a session's sandbox, filling its disk, deleting it mid-command: each is said out loud.
 * `sbx serve` (and `sbx api` + `sbx worker` for the lost sandbox), `docker kill` of the session's
 * container, found by the service's labels.
 */

const run = promisify(execFile)

interface Replacement {
  at: number
  reason: string
  filesLost: boolean
  previousSandboxId: string
}
interface Job {
  id: string
  state: string
  result?: {
    stdout: string
    exitCode: number | null
    signal?: string
    sandboxId: string
    sandboxReplaced?: Replacement
  }
  error?: { code: string; message: string }
}
interface SessionView {
  id: string
  sandboxId?: string
  sandboxReplaced?: Replacement
}

async function exec(srv: SbxServer, sessionId: string, command: string, wait = true): Promise<Job> {
  const res = await srv.post(`/v1/exec${wait ? '' : '?wait=false'}`, {
    provider: 'docker',
    profile: 'default',
    sessionId,
    command,
  })
  expect(res.status, await res.clone().text()).toBe(wait ? 200 : 202)
  return (await res.json()) as Job
}

/**
 * Resolves once the session's running command has created `path`, asking the file API until it
 * answers 200. (Not the SSE stream: it carries only output published after the subscription, and a
 * command in a warm session can print before the client subscribes.)
 */
async function commandStarted(srv: SbxServer, sessionId: string, path: string): Promise<void> {
  const deadline = Date.now() + 60_000
  for (;;) {
    const res = await srv.fetch(`/v1/sessions/${sessionId}/files?path=${encodeURIComponent(path)}`)
    await res.arrayBuffer()
    if (res.status === 200) return
    if (res.status !== 404 || Date.now() > deadline)
      throw new Error(`waiting for ${path} in session ${sessionId}: HTTP ${res.status}`)
  }
}

/** The running container of a session, by the labels the service puts on it. */
async function sessionContainer(scope: string, sandboxId: string): Promise<string> {
  const { stdout } = await run('docker', [
    'ps',
    '-q',
    '--no-trunc',
    '--filter',
    `label=sandbox-router.scope=${scope}`,
    '--filter',
    'label=sandbox-router.owner=sandbox-router',
  ])
  const ids = stdout.split('\n').filter(Boolean)
  const id = ids.find((c) => c === sandboxId)
  if (!id) throw new Error(`no running container ${sandboxId} in scope ${scope}: ${ids.join(', ')}`)
  return id
}

async function session(srv: SbxServer, id: string): Promise<SessionView> {
  const res = await srv.fetch(`/v1/sessions/${id}`)
  expect(res.status).toBe(200)
  return (await res.json()) as SessionView
}

/**
 * The whole story of a sandbox killed between commands: the next command runs (nothing ran on the
 * lost sandbox) in a fresh one and says the files are gone; so do later results and the session
 * views, and a file read names the missing path, until the user acknowledges.
 */
async function killedBetweenCommands(srv: SbxServer, scope: string, sessionId: string): Promise<void> {
  const first = await exec(srv, sessionId, 'echo precious > /workspace/data; echo written')
  expect(first.state).toBe('completed')
  const lostId = first.result?.sandboxId ?? ''
  await run('docker', ['kill', await sessionContainer(scope, lostId)])

  const next = await exec(srv, sessionId, 'cat /workspace/data 2>&1; echo ran')
  expect(next.state, JSON.stringify(next)).toBe('completed')
  expect(next.result?.stdout).toMatch(/No such file[\s\S]*ran\n$/)
  expect(next.result?.sandboxId).not.toBe(lostId)
  expect(next.result?.sandboxReplaced).toMatchObject({ filesLost: true, previousSandboxId: lostId })
  expect(next.result?.sandboxReplaced?.reason).toMatch(/not running|no longer exists|does not exist/)
  // The pool replaced it already: the notice gives no "destroy it and create a new sandbox" advice.
  expect(next.result?.sandboxReplaced?.reason).not.toContain('destroy it')
  const notice = next.result?.sandboxReplaced

  const later = await exec(srv, sessionId, 'echo later')
  expect(later.result?.sandboxReplaced).toEqual(notice)
  // An agent's tool call in the session reads it too, in the text the model sees.
  const tool = await srv.post('/v1/tool-calls', {
    name: 'bash',
    arguments: { command: 'echo via-tool' },
    sessionId,
  })
  expect(tool.status).toBe(200)
  const toolOut = ((await tool.json()) as { output: string }).output
  expect(toolOut).toContain('[sandbox replaced at ')
  expect(toolOut).toContain('files from before are lost')
  expect(toolOut).toContain('via-tool')
  const listed = (await (await srv.fetch('/v1/sessions')).json()) as { sessions: SessionView[] }
  expect(listed.sessions.find((s) => s.id === sessionId)?.sandboxReplaced).toEqual(notice)
  const view = await session(srv, sessionId)
  expect(view.sandboxReplaced).toEqual(notice)
  expect(view.sandboxId).toBe(next.result?.sandboxId)

  // The file is missing, the session is not: the 404 names the path and the replacement.
  const file = await srv.fetch(`/v1/sessions/${sessionId}/files?path=/workspace/data`)
  expect(file.status).toBe(404)
  const fileErr = ((await file.json()) as { error: { message: string } }).error.message
  expect(fileErr).toContain('/workspace/data')
  expect(fileErr).toContain('replaced')
  expect(fileErr).not.toMatch(/^no session/)

  const put = await srv.fetch(`/v1/sessions/${sessionId}/files?path=/workspace/new`, {
    method: 'PUT',
    body: 'fresh',
  })
  expect(put.status).toBe(200)
  expect(((await put.json()) as { sandboxReplaced?: Replacement }).sandboxReplaced).toEqual(notice)

  const acked = await srv.post(`/v1/sessions/${sessionId}/ack`, {})
  expect(acked.status).toBe(200)
  expect(((await acked.json()) as SessionView).sandboxReplaced).toBeUndefined()
  const quiet = await exec(srv, sessionId, 'echo quiet')
  expect(quiet.state).toBe('completed')
  expect(quiet.result?.sandboxReplaced).toBeUndefined()
  expect((await session(srv, sessionId)).sandboxReplaced).toBeUndefined()
  const put2 = await srv.fetch(`/v1/sessions/${sessionId}/files?path=/workspace/new`, {
    method: 'PUT',
    body: 'again',
  })
  expect(await put2.json()).toEqual({ path: '/workspace/new', bytes: 5 })
}

const KEY_A = `sbx_test_a_${uniqueName('k')}`
const KEY_B = `sbx_test_b_${uniqueName('k')}`

describe('sandbox loss, full disk and deletes through sbx serve', () => {
  const scope = uniqueName('loss')
  let srv: SbxServer
  beforeAll(async () => {
    srv = await startSbxServer('serve', {
      config: {
        queue: { prefix: scope },
        quotas: { requestsPerSecond: 1000 },
        apiKeys: [
          { key: KEY_A, tenant: 'ta' },
          { key: KEY_B, tenant: 'tb' },
        ],
      },
      env: { SBX_API_KEY: KEY_A },
    })
  }, 120_000)
  afterAll(async () => {
    await srv?.stop()
    await removeScopeContainers(scope)
  })

  test('a container killed between commands: the next command runs in a fresh sandbox and says the files are lost', async () => {
    await killedBetweenCommands(srv, scope, 'k1')
  }, 120_000)

  test("another tenant sees nothing of a session's replacement, and cannot acknowledge it", async () => {
    const job = await exec(srv, 'k3', 'true')
    await run('docker', ['kill', await sessionContainer(scope, job.result?.sandboxId ?? '')])
    expect((await exec(srv, 'k3', 'true')).result?.sandboxReplaced).toBeDefined()
    expect((await srv.fetch('/v1/sessions/k3', { key: KEY_B })).status).toBe(404)
    expect((await srv.post('/v1/sessions/k3/ack', {}, { key: KEY_B })).status).toBe(404)
    const theirs = (await (await srv.fetch('/v1/sessions', { key: KEY_B })).json()) as {
      sessions: SessionView[]
    }
    expect(theirs.sessions).toEqual([])
    // The same session name in the other tenant is its own session, with no notice.
    const other = await srv.post(
      '/v1/exec',
      { provider: 'docker', profile: 'default', sessionId: 'k3', command: 'true' },
      { key: KEY_B },
    )
    const otherJob = (await other.json()) as Job
    expect(otherJob.state).toBe('completed')
    expect(otherJob.result?.sandboxReplaced).toBeUndefined()
    expect((await session(srv, 'k3')).sandboxReplaced).toBeDefined()
  }, 120_000)

  test('a container killed during a command: that command is SANDBOX_LOST, the next one runs and says so', async () => {
    const job = await exec(srv, 'k2', 'touch /workspace/started; sleep 60', false)
    await commandStarted(srv, 'k2', '/workspace/started')
    const lostId = (await session(srv, 'k2')).sandboxId ?? ''
    await run('docker', ['kill', await sessionContainer(scope, lostId)])
    const final = await waitJob(srv, job.id)
    expect(final.state).toBe('failed')
    expect(final.error?.code).toBe('SANDBOX_LOST')
    expect(final.error?.message).toContain('may have run partly')
    expect(final.error?.message).toContain("the session's next call runs in a fresh, empty sandbox")
    const next = await exec(srv, 'k2', 'echo again')
    expect(next.state).toBe('completed')
    expect(next.result?.sandboxReplaced).toMatchObject({ filesLost: true, previousSandboxId: lostId })
    expect(next.result?.sandboxReplaced?.reason).toMatch(/lost while in use/)
    expect(next.result?.sandboxReplaced?.reason).not.toContain('destroy it')
  }, 120_000)

  test('a missing file is a 404 naming the path; "no session" only when there is no session', async () => {
    expect((await exec(srv, 'f1', 'echo hi > /workspace/here')).state).toBe('completed')
    const missing = await srv.fetch('/v1/sessions/f1/files?path=/workspace/nonexistent')
    expect(missing.status).toBe(404)
    const msg = ((await missing.json()) as { error: { message: string } }).error.message
    expect(msg).toBe('no file /workspace/nonexistent in session f1')
    const none = await srv.fetch('/v1/sessions/nosuch/files?path=/workspace/here')
    expect(none.status).toBe(404)
    expect(((await none.json()) as { error: { message: string } }).error.message).toBe('no session nosuch')
  }, 60_000)

  test('a full /workspace is ENOSPC, not an out-of-memory kill, and memory stays usable', async () => {
    const fill = await exec(
      srv,
      'disk',
      'echo old > /workspace/keep.txt; dd if=/dev/zero of=/workspace/big bs=1M count=600 2>&1 | tail -n 3; echo "dd=${PIPESTATUS[0]}"',
    )
    expect(fill.state, JSON.stringify(fill)).toBe('completed')
    expect(fill.result?.signal).toBeUndefined()
    expect(fill.result?.stdout).toContain('No space left on device')
    expect(fill.result?.stdout).toMatch(/dd=1\n$/)
    // With the disk full, a command still has the profile's memory.
    const mem = await exec(srv, 'disk', 'x=$(head -c 10m /dev/zero | tr "\\0" a); echo ${#x}')
    expect(mem.result?.exitCode, JSON.stringify(mem)).toBe(0)
    expect(mem.result?.stdout).toBe('10485760\n')
    const tmp = await exec(srv, 'disk', 'dd if=/dev/zero of=/tmp/big bs=1M count=300 2>&1 | tail -n 3')
    expect(tmp.result?.stdout).toContain('No space left on device')
    // An upload into the full disk says so (507), not a 429 that invites a retry.
    const put = await srv.fetch('/v1/sessions/disk/files?path=/workspace/more.bin', {
      method: 'PUT',
      headers: { 'content-type': 'application/octet-stream' },
      body: new Uint8Array(2 * 1024 * 1024),
    })
    expect(put.status).toBe(507)
    const body = (await put.json()) as { error: { code: string; message: string } }
    expect(body.error.code).toBe('NO_SPACE')
    expect(body.error.message).toContain('diskMb')
    // The failed upload left nothing: no empty or partial file, and no part file.
    expect((await srv.fetch('/v1/sessions/disk/files?path=/workspace/more.bin')).status).toBe(404)
    // An upload over an existing file that fails keeps the file as it was (it is written beside it
    // and renamed into place only once whole).
    const over = await srv.fetch('/v1/sessions/disk/files?path=/workspace/keep.txt', {
      method: 'PUT',
      headers: { 'content-type': 'application/octet-stream' },
      body: new Uint8Array(3 * 1024 * 1024),
    })
    expect(over.status).toBe(507)
    const kept = await srv.fetch('/v1/sessions/disk/files?path=/workspace/keep.txt')
    expect(kept.status).toBe(200)
    expect(await kept.text()).toBe('old\n')
    const left = await exec(srv, 'disk', 'ls -A /workspace')
    expect(left.result?.stdout).toBe('big\nkeep.txt\n')
  }, 120_000)

  test('deleting a session during a command ends it "cancelled: session deleted", quickly', async () => {
    await deleteDuringCommand(srv, 'del')
  }, 120_000)
})

describe('sandbox loss through sbx api + sbx worker', () => {
  const scope = uniqueName('lossf')
  const started: { stop(): Promise<void> }[] = []
  afterAll(async () => {
    for (const s of started.reverse()) await s.stop()
    await removeScopeContainers(scope)
    const redis = new Redis(SHARED_REDIS)
    await deleteKeys(`${scope}:*`, redis)
    await redis.quit()
  })

  test('a container killed between commands: the fleet runs the next command and says the files are lost', async () => {
    const config = fleetConfig(scope, { quotas: { requestsPerSecond: 1000 } })
    const api = await startSbxServer('api', { config })
    started.push(api)
    started.push(await startSbxWorker({ config }))
    await killedBetweenCommands(api, scope, 'fk1')
    await deleteDuringCommand(api, 'fdel')
  }, 180_000)
})

/** A session deleted while its command runs: the DELETE is quick, the command ends "session deleted". */
async function deleteDuringCommand(srv: SbxServer, sessionId: string): Promise<void> {
  const job = await exec(srv, sessionId, 'touch /workspace/started; sleep 60', false)
  await commandStarted(srv, sessionId, '/workspace/started')
  const t0 = Date.now()
  expect((await srv.fetch(`/v1/sessions/${sessionId}`, { method: 'DELETE' })).status).toBe(200)
  const deleteMs = Date.now() - t0
  const final = await waitJob(srv, job.id)
  expect(final.state, JSON.stringify(final)).toBe('cancelled')
  expect(final.error?.code).toBe('JOB_CANCELLED')
  expect(final.error?.message).toContain(`session '${sessionId}' was deleted`)
  expect(deleteMs).toBeLessThan(3_000)
  expect((await srv.fetch(`/v1/sessions/${sessionId}`)).status).toBe(404)
}

/** The job once it is over (`GET /v1/jobs/:id` after its event stream ends). */
async function waitJob(srv: SbxServer, id: string): Promise<Job> {
  const res = await srv.fetch(`/v1/jobs/${id}/events`)
  await res.text()
  return (await (await srv.fetch(`/v1/jobs/${id}`)).json()) as Job
}
