import { execFile } from 'node:child_process'
import { promisify } from 'node:util'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { removeScope, startSbxServer, uniqueName } from '../support/sbx-cli.js'
import type { SbxServer } from '../support/sbx-cli.js'

const run = promisify(execFile)

interface Proc {
  id: string
  command: string
  pid: number
  state: 'running' | 'exited' | 'lost'
  exitCode: number | null
  signal: string | null
  startedAt: number
  endedAt: number | null
  stdinClosed: boolean
  stdoutBytes: number
}
interface Slice {
  data: string
  offset: number
  nextOffset: number
  dropped: number
}
interface Output {
  process: Proc
  stdout: Slice
  stderr: Slice
}

const COUNTER = `sh -c 'i=0; while :; do echo $i; i=$((i+1)); sleep 0.05; done'`
const ACME = `acme_${'a'.repeat(24)}`
const GLOBEX = `globex_${'g'.repeat(24)}`

/**
 * Background processes through `node bin/sbx.js serve` over HTTP on the real engine: start, list,
 * output from offsets (with a capped buffer that drops the oldest bytes), stdin, signals, the
 * per-session limit, another tenant's 404, and processes gone with their session.
 */
describe('background processes through sbx serve (HTTP)', () => {
  const scope = uniqueName('procs')
  let srv: SbxServer

  beforeAll(async () => {
    srv = await startSbxServer('serve', {
      config: {
        queue: { prefix: scope },
        apiKeys: [
          { keyEnv: 'PROCS_ACME_KEY', tenant: 'acme' },
          { keyEnv: 'PROCS_GLOBEX_KEY', tenant: 'globex' },
        ],
        // A small buffer (the minimum, 1 KiB) so that the counter wraps it within a second or two.
        quotas: { maxProcessesPerSession: 3, processOutputBytes: 1024, requestsPerSecond: 1000 },
      },
      env: { SBX_API_KEY: ACME, PROCS_ACME_KEY: ACME, PROCS_GLOBEX_KEY: GLOBEX },
    })
  }, 180_000)

  afterAll(async () => {
    await srv?.stop()
    await removeScope(scope)
  }, 60_000)

  const session = async (id: string): Promise<string> => {
    const res = await srv.post('/v1/sessions', { id, provider: 'docker', profile: 'default' })
    expect(res.status).toBe(201)
    return id
  }
  const json = async <T>(res: Response, status = 200): Promise<T> => {
    const body = await res.text()
    expect(res.status, body).toBe(status)
    return JSON.parse(body) as T
  }
  const start = async (sid: string, command: string): Promise<Proc> =>
    json<Proc>(await srv.post(`/v1/sessions/${sid}/processes`, { command }), 201)
  const output = async (sid: string, pid: string, query = ''): Promise<Output> =>
    json<Output>(await srv.fetch(`/v1/sessions/${sid}/processes/${pid}/output${query}`))
  /**
   * Reads on from where the last read ended, each read a long poll (it answers once there is output
   * past the offsets or the process ended), until `done` holds for what came so far.
   */
  const collect = async (
    sid: string,
    pid: string,
    done: (got: { stdout: string; stderr: string; last: Output }) => boolean,
    from = { stdout: 0, stderr: 0 },
  ): Promise<{ stdout: string; stderr: string; last: Output }> => {
    const got = { stdout: '', stderr: '', last: undefined as unknown as Output }
    const at = { ...from }
    for (const deadline = Date.now() + 30_000; ;) {
      const o = await output(sid, pid, `?stdoutOffset=${at.stdout}&stderrOffset=${at.stderr}&waitMs=5000`)
      got.stdout += o.stdout.data
      got.stderr += o.stderr.data
      got.last = o
      at.stdout = o.stdout.nextOffset
      at.stderr = o.stderr.nextOffset
      if (done(got)) return got
      if (Date.now() > deadline) throw new Error(`gave up waiting; got ${JSON.stringify(got)}`)
    }
  }

  test('start, list, read from offsets, the buffer drops the oldest and says how many; kill', async () => {
    const sid = await session(uniqueName('counter'))
    const p = await start(sid, COUNTER)
    expect(p).toMatchObject({ command: COUNTER, state: 'running', exitCode: null, endedAt: null })
    expect(p.id).toMatch(/^p-[0-9a-f]{12}$/)
    expect(p.pid).toBeGreaterThan(0)

    const listed = await json<{ processes: Proc[] }>(await srv.fetch(`/v1/sessions/${sid}/processes`))
    expect(listed.processes.map((x) => [x.id, x.state])).toEqual([[p.id, 'running']])

    // Read after read from each nextOffset: contiguous, nothing dropped, no line twice.
    const got = await collect(sid, p.id, (g) => g.stdout.includes('\n12\n'))
    const lines = got.stdout.split('\n').filter(Boolean).map(Number)
    expect(lines).toEqual(lines.map((_, i) => i))
    expect(got.last.stdout.dropped).toBe(0)
    // From an offset in the middle: exactly the bytes from there; maxBytes bounds one read.
    const mid = await output(sid, p.id, '?offset=2&maxBytes=4')
    expect(mid.stdout).toMatchObject({ offset: 2, nextOffset: 6, dropped: 0, data: '1\n2\n' })

    // SIGTERM reaches the whole group (sh and its sleep); the answer waits for the end.
    const killed = await json<Proc>(
      await srv.post(`/v1/sessions/${sid}/processes/${p.id}/signal`, { signal: 'SIGTERM' }),
    )
    expect(killed).toMatchObject({ state: 'exited', exitCode: null, signal: 'SIGTERM' })
    expect(killed.endedAt).toBeGreaterThanOrEqual(killed.startedAt)
    const again = await srv.post(`/v1/sessions/${sid}/processes/${p.id}/signal`, { signal: 'SIGTERM' })
    expect(again.status).toBe(409)
    // Its output stays readable after the end.
    const after = await output(sid, p.id, '?offset=0&maxBytes=2')
    expect(after.stdout.data).toBe('0\n')
    expect(after.process.state).toBe('exited')

    const bad = await json<{ error: { code: string; message: string } }>(
      await srv.post(`/v1/sessions/${sid}/processes/${p.id}/signal`, { signal: 'SIGNOPE' }),
      400,
    )
    expect(bad.error.message).toMatch(/unknown signal.*SIGTERM/)

    // DELETE forgets it.
    await json<Proc>(await srv.fetch(`/v1/sessions/${sid}/processes/${p.id}`, { method: 'DELETE' }))
    const gone = await json<{ error: { code: string } }>(
      await srv.fetch(`/v1/sessions/${sid}/processes/${p.id}`),
      404,
    )
    expect(gone.error.code).toBe('NOT_FOUND')
  }, 120_000)

  test('past the buffer (1 KiB here) the oldest bytes are dropped, and a read says how many', async () => {
    const sid = await session(uniqueName('wrap'))
    const p = await start(sid, 'seq 1 3000; echo done >&2')
    const end = await collect(sid, p.id, (g) => g.last.process.state === 'exited' && g.stderr === 'done\n')
    const total = end.last.process.stdoutBytes
    expect(total).toBe(Array.from({ length: 3000 }, (_, i) => `${i + 1}\n`).join('').length)
    const o = await output(sid, p.id, '?offset=0&maxBytes=1048576')
    expect(o.stdout).toMatchObject({ offset: total - 1024, nextOffset: total, dropped: total - 1024 })
    expect(o.stdout.data.length).toBe(1024)
    expect(o.stdout.data.endsWith('2999\n3000\n')).toBe(true)
    // An offset inside the buffer drops nothing.
    const tail = await output(sid, p.id, `?stdoutOffset=${total - 5}`)
    expect(tail.stdout).toMatchObject({ data: '3000\n', offset: total - 5, dropped: 0 })
  }, 120_000)

  test('a read never cuts a UTF-8 character: nextOffset stops before it', async () => {
    const sid = await session(uniqueName('utf8'))
    const p = await start(sid, "printf 'héllo wörld'")
    await collect(sid, p.id, (g) => g.last.process.state === 'exited' && g.stdout.length > 0)
    // 'h' (1 byte) + 'é' (2 bytes): a 2-byte read ends inside 'é', so it returns only 'h'.
    const first = await output(sid, p.id, '?offset=0&maxBytes=2')
    expect(first.stdout).toMatchObject({ data: 'h', offset: 0, nextOffset: 1 })
    let text = ''
    for (let at = 0, i = 0; i < 40; i++) {
      const o = await output(sid, p.id, `?stdoutOffset=${at}&maxBytes=3`)
      if (o.stdout.nextOffset === at) break
      text += o.stdout.data
      at = o.stdout.nextOffset
    }
    expect(text).toBe('héllo wörld')
  }, 120_000)

  test('stdin: lines written reach a read loop, closing stdin ends it', async () => {
    const sid = await session(uniqueName('stdin'))
    const p = await start(sid, 'while read -r l; do echo "got $l"; echo "err $l" >&2; done; echo bye; exit 3')
    const w = await json<{ written: number }>(
      await srv.post(`/v1/sessions/${sid}/processes/${p.id}/stdin`, { data: 'one\ntwo\n' }),
    )
    expect(w.written).toBe(8)
    const o = await collect(sid, p.id, (g) => g.stdout.includes('got two') && g.stderr.includes('err two'))
    expect(o.stdout).toBe('got one\ngot two\n')
    expect(o.stderr).toBe('err one\nerr two\n')
    expect(o.last.process.state).toBe('running')

    const closed = await json<{ written: number; process: Proc }>(
      await srv.post(`/v1/sessions/${sid}/processes/${p.id}/stdin`, { data: 'three\n', close: true }),
    )
    expect(closed.process.stdinClosed).toBe(true)
    const end = await collect(
      sid,
      p.id,
      (g) => g.last.process.state === 'exited' && g.stdout.includes('bye'),
      {
        stdout: o.last.stdout.nextOffset,
        stderr: o.last.stderr.nextOffset,
      },
    )
    expect(end.stdout).toBe('got three\nbye\n')
    expect(end.last.process).toMatchObject({ exitCode: 3, signal: null })
    const late = await json<{ error: { message: string } }>(
      await srv.post(`/v1/sessions/${sid}/processes/${p.id}/stdin`, { data: 'x' }),
      409,
    )
    expect(late.error.message).toMatch(/stdin .* is closed/)
  }, 120_000)

  test('the per-session limit is refused with 429 naming the config key; an ended one frees a slot', async () => {
    const sid = await session(uniqueName('limit'))
    const ps = [await start(sid, 'sleep 600'), await start(sid, 'sleep 600'), await start(sid, 'sleep 600')]
    const refused = await json<{ error: { code: string; message: string } }>(
      await srv.post(`/v1/sessions/${sid}/processes`, { command: 'sleep 600' }),
      429,
    )
    expect(refused.error.code).toBe('QUOTA_EXCEEDED')
    expect(refused.error.message).toContain('quotas.maxProcessesPerSession')
    // Another session has its own count.
    const other = await session(uniqueName('limit2'))
    await start(other, 'true')
    // SIGKILL one: its slot is free again.
    await json<Proc>(await srv.post(`/v1/sessions/${sid}/processes/${ps[0]?.id}/signal`, { signal: 'KILL' }))
    await start(sid, 'sleep 600')
  }, 120_000)

  test("another tenant's key gets 404 on every process route", async () => {
    const sid = await session(uniqueName('iso'))
    const p = await start(sid, 'sleep 600')
    const as = { key: GLOBEX }
    const base = `/v1/sessions/${sid}/processes`
    const attempts = [
      await srv.fetch(base, as),
      await srv.post(base, { command: 'echo hi' }, as),
      await srv.fetch(`${base}/${p.id}`, as),
      await srv.fetch(`${base}/${p.id}/output`, as),
      await srv.post(`${base}/${p.id}/stdin`, { data: 'x' }, as),
      await srv.post(`${base}/${p.id}/signal`, { signal: 'SIGKILL' }, as),
      await srv.fetch(`${base}/${p.id}`, { ...as, method: 'DELETE' }),
    ]
    expect(attempts.map((r) => r.status)).toEqual(attempts.map(() => 404))
    // Still running for its owner.
    const mine = await json<Proc>(await srv.fetch(`${base}/${p.id}`))
    expect(mine.state).toBe('running')
  }, 120_000)

  test('the OpenAPI document describes every process route', async () => {
    const doc = await json<{ paths: Record<string, Record<string, unknown>> }>(
      await srv.fetch('/openapi.json'),
    )
    const base = '/v1/sessions/{id}/processes'
    expect(Object.keys(doc.paths[base] ?? {}).sort()).toEqual(['get', 'post'])
    expect(Object.keys(doc.paths[`${base}/{processId}`] ?? {}).sort()).toEqual(['delete', 'get'])
    for (const [path, method] of [
      [`${base}/{processId}/output`, 'get'],
      [`${base}/{processId}/stdin`, 'post'],
      [`${base}/{processId}/signal`, 'post'],
    ] as const)
      expect(doc.paths[path]?.[method], path).toBeDefined()
  }, 60_000)

  test('bad input is refused with a message saying what is wrong', async () => {
    const sid = await session(uniqueName('bad'))
    // A session without a sandbox has no processes, and asking does not create one.
    expect(await json<{ processes: Proc[] }>(await srv.fetch(`/v1/sessions/${sid}/processes`))).toEqual({
      processes: [],
    })
    expect((await srv.fetch(`/v1/sessions/${sid}/processes/p-000000000000/output`)).status).toBe(404)
    expect(await json<{ sandboxId?: string }>(await srv.fetch(`/v1/sessions/${sid}`))).not.toHaveProperty(
      'sandboxId',
    )
    const empty = await json<{ error: { message: string } }>(
      await srv.post(`/v1/sessions/${sid}/processes`, { command: '' }),
      400,
    )
    expect(empty.error.message).toContain('command')
    const extra = await json<{ error: { message: string } }>(
      await srv.post(`/v1/sessions/${sid}/processes`, { command: 'true', timeout: 5 }),
      400,
    )
    expect(extra.error.message).toMatch(/timeout|unrecognized/i)
    const unknown = await json<{ error: { message: string } }>(
      await srv.fetch(`/v1/sessions/${sid}/processes/p-000000000000`),
      404,
    )
    expect(unknown.error.message).toContain('no process p-000000000000')
    const noDir = await json<{ error: { message: string } }>(
      await srv.post(`/v1/sessions/${sid}/processes`, { command: 'pwd', cwd: '/no/such/dir' }),
      400,
    )
    expect(noDir.error.message).toContain('no directory /no/such/dir in the sandbox')
    // A cwd that exists is where it runs; env reaches it.
    const inTmp = await json<Proc>(
      await srv.post(`/v1/sessions/${sid}/processes`, {
        command: 'echo "$PWD $SBX_X"',
        cwd: '/tmp',
        env: { SBX_X: 'y' },
      }),
      201,
    )
    const out = await collect(sid, inTmp.id, (g) => g.last.process.state === 'exited' && g.stdout.length > 0)
    expect(out.stdout).toBe('/tmp y\n')
    const noSession = await srv.fetch(`/v1/sessions/${uniqueName('none')}/processes`)
    expect(noSession.status).toBe(404)
  }, 120_000)

  test("a session's processes die with it: deleting the session destroys the sandbox they ran in", async () => {
    const sid = await session(uniqueName('del'))
    await start(sid, 'sleep 600')
    await start(sid, COUNTER)
    const view = await json<{ sandboxId: string }>(await srv.fetch(`/v1/sessions/${sid}`))
    const { stdout } = await run('docker', ['top', view.sandboxId, '-eo', 'pid,args'])
    expect(stdout).toContain('sleep 600')
    await json(await srv.fetch(`/v1/sessions/${sid}`, { method: 'DELETE' }))
    const inspect = await run('docker', ['inspect', view.sandboxId]).then(
      () => 'present',
      () => 'gone',
    )
    expect(inspect).toBe('gone')
    expect((await srv.fetch(`/v1/sessions/${sid}/processes`)).status).toBe(404)
  }, 120_000)
})
