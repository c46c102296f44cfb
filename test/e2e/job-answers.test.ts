import { performance } from 'node:perf_hooks'
import { afterAll, describe, expect, test } from 'vitest'
import { openJobEvents } from '../support/job-stream.js'
import {
  configDir,
  fleetConfig,
  startSbxServer,
  startSbxWorker,
  uniqueName,
  removeScope,
} from '../support/sbx-cli.js'
import type { LineChild, SbxServer } from '../support/sbx-cli.js'

/*
 * Answers that never hide that a job ran, through the entry points users start: `sbx api` +
 * `sbx worker` on the shared Redis (a prefix of its own) and `sbx serve`, talked to over HTTP only.
 */

const KEY_A = 'job-answers-key-a-0123456789abcdef'
const KEY_B = 'job-answers-key-b-0123456789abcdef'
const apiKeys = [
  { key: KEY_A, tenant: 'acme' },
  { key: KEY_B, tenant: 'globex' },
]

interface Job {
  id: string
  state: string
  sessionId?: string
  result?: { stdout: string; exitCode: number | null }
  error?: { code: string; message: string }
  partialOutput?: { stdout: string; stderr: string }
}

const started: { stop(): Promise<void> }[] = []
const scopes: string[] = []
afterAll(async () => {
  for (const s of started.reverse()) await s.stop()
  for (const scope of scopes) await removeScope(scope)
}, 120_000)

const run = (command: string, sessionId?: string) => ({
  provider: 'docker',
  profile: 'default',
  command,
  ...(sessionId ? { sessionId } : {}),
})

async function execDone(srv: SbxServer, command: string, sessionId: string): Promise<Job> {
  const res = await srv.post('/v1/exec', run(command, sessionId), { key: KEY_A })
  expect(res.status).toBe(200)
  return (await res.json()) as Job
}

/** The job id is on the wire before the job ends; the body, read later, is the job's final view. */
async function headersBeforeTheEnd(srv: SbxServer, sessionId: string) {
  const t0 = performance.now()
  const res = await srv.post('/v1/exec', run('echo begun >> log; sleep 4; echo done', sessionId), {
    key: KEY_A,
  })
  const id = res.headers.get('x-job-id')
  console.log(
    `[job-answers] status and X-Job-Id after ${Math.round(performance.now() - t0)} ms (the job takes 4 s)`,
  )
  expect(res.status).toBe(200)
  expect(id).toMatch(/^j[0-9a-f]{32}$/)
  expect(res.headers.get('location')).toBe(`/v1/jobs/${id}`)
  // fetch resolved on the headers: the job is still going.
  const meanwhile = (await (await srv.fetch(`/v1/jobs/${id}`, { key: KEY_A })).json()) as Job
  expect(['queued', 'running']).toContain(meanwhile.state)
  return { res, id: id as string }
}

describe('waiting POST /v1/exec: the job id before the wait, and a way back to the job', () => {
  test('sbx api + sbx worker: a client cut off by an API SIGKILL finds its job by id and in its listing; the command ran once', async () => {
    const prefix = uniqueName('jans')
    scopes.push(prefix)
    const config = fleetConfig(prefix, { apiKeys })
    const dir = configDir(config)
    let api = await startSbxServer('api', { config, cwd: dir })
    // Stopped at the end even when the test fails before it kills this one.
    started.push(api)
    const worker: LineChild = await startSbxWorker({ config, cwd: dir })
    started.push(worker)
    expect((await execDone(api, 'true', 's1')).state).toBe('completed')
    // A command that ends within the answer's grace is answered in one piece, its id in the headers.
    const quick = await api.post('/v1/exec', run('echo quick', 's1'), { key: KEY_A })
    expect(quick.headers.get('content-length')).toMatch(/^\d+$/)
    const quickJob = (await quick.json()) as Job
    expect(quickJob.state).toBe('completed')
    expect(quick.headers.get('x-job-id')).toBe(quickJob.id)
    expect(quick.headers.get('location')).toBe(`/v1/jobs/${quickJob.id}`)

    const { res, id } = await headersBeforeTheEnd(api, 's1')
    const cut = res.text().then(
      () => undefined,
      (err: unknown) => err,
    )
    await api.kill()
    expect(await cut).toBeInstanceOf(Error)

    api = await startSbxServer('api', { config, cwd: dir })
    started.push(api)
    const events = await openJobEvents(api, id, KEY_A)
    const result = JSON.parse((await events.next((e) => e.event === 'result')).data) as Job
    events.close()
    expect(result.state, JSON.stringify(result)).toBe('completed')
    expect(result.result?.stdout).toBe('done\n')
    expect((await execDone(api, 'cat log', 's1')).result?.stdout).toBe('begun\n')

    // The listing: the tenant's own jobs, newest first, also by session; nothing of another tenant.
    const mine = (await (await api.fetch('/v1/jobs?sessionId=s1&limit=10', { key: KEY_A })).json()) as {
      jobs: Job[]
    }
    expect(mine.jobs.map((j) => j.id)).toContain(id)
    expect(mine.jobs[0]?.result?.stdout).toBe('begun\n')
    expect(mine.jobs.every((j) => j.sessionId === 's1')).toBe(true)
    const all = (await (await api.fetch('/v1/jobs', { key: KEY_A })).json()) as { jobs: Job[] }
    // true, echo quick, the cut-off job, cat log.
    expect(all.jobs.length).toBe(4)
    const theirs = (await (await api.fetch('/v1/jobs?sessionId=s1', { key: KEY_B })).json()) as {
      jobs: Job[]
    }
    expect(theirs.jobs).toEqual([])
    expect((await api.fetch('/v1/jobs', { key: KEY_B }).then((r) => r.json())) as unknown).toEqual({
      jobs: [],
    })
    const foreign = await api.fetch(`/v1/jobs/${id}`, { key: KEY_B })
    expect(foreign.status).toBe(404)
    const bad = await api.fetch('/v1/jobs?limit=0', { key: KEY_A })
    expect(bad.status).toBe(400)
    expect(((await bad.json()) as { error: { message: string } }).error.message).toMatch(/limit/)
  }, 240_000)

  test('sbx serve: the same answer shape, the listing tenant-scoped', async () => {
    const prefix = uniqueName('janse')
    scopes.push(prefix)
    const srv = await startSbxServer('serve', { config: { queue: { prefix }, apiKeys } })
    started.push(srv)
    expect((await execDone(srv, 'true', 'e1')).state).toBe('completed')
    const { res, id } = await headersBeforeTheEnd(srv, 'e1')
    const job = (await res.json()) as Job
    expect(job).toMatchObject({ id, state: 'completed', result: { stdout: 'done\n', exitCode: 0 } })
    const mine = (await (await srv.fetch('/v1/jobs?sessionId=e1', { key: KEY_A })).json()) as { jobs: Job[] }
    expect(mine.jobs.map((j) => j.id)[0]).toBe(id)
    expect(mine.jobs).toHaveLength(2)
    const theirs = (await (await srv.fetch('/v1/jobs', { key: KEY_B })).json()) as { jobs: Job[] }
    expect(theirs.jobs).toEqual([])
    // The OpenAPI document describes the listing and the new job fields.
    const doc = (await (await srv.fetch('/openapi.json')).json()) as {
      paths: Record<string, Record<string, unknown>>
      components: { schemas: Record<string, { properties?: Record<string, { enum?: string[] }> }> }
    }
    expect(Object.keys(doc.paths['/v1/jobs'] ?? {})).toContain('get')
    expect(doc.components.schemas['Job']?.properties?.['state']?.enum).toContain('unknown')
    expect(Object.keys(doc.components.schemas['Job']?.properties ?? {})).toContain('partialOutput')
  }, 180_000)
})

describe('an interrupted job keeps the output tail it had published', () => {
  test('worker SIGKILLed mid-command: GET /v1/jobs/:id and the SSE result carry the partial output', async () => {
    const prefix = uniqueName('jint')
    scopes.push(prefix)
    const config = fleetConfig(prefix, { apiKeys })
    const dir = configDir(config)
    const api = await startSbxServer('api', { config, cwd: dir })
    started.push(api)
    const first = await startSbxWorker({ config, cwd: dir })
    started.push(first)
    const accepted = await api.post(
      '/v1/exec?wait=false',
      run('echo partial-output-line; echo partial-err >&2; sleep 120; echo never'),
      { key: KEY_A },
    )
    expect(accepted.status).toBe(202)
    const { id } = (await accepted.json()) as Job
    const events = await openJobEvents(api, id, KEY_A)
    await events.next((e) => e.event === 'stdout' && e.data.includes('partial-output-line'))
    await events.next((e) => e.event === 'stderr' && e.data.includes('partial-err'))
    await first.kill()
    const second = await startSbxWorker({ config, cwd: dir })
    started.push(second)

    const result = JSON.parse((await events.next((e) => e.event === 'result', 90_000)).data) as Job
    events.close()
    expect(result.state, JSON.stringify(result)).toBe('interrupted')
    expect(result.error?.code).toBe('JOB_INTERRUPTED')
    expect(result.partialOutput?.stdout).toBe('partial-output-line\n')
    expect(result.partialOutput?.stderr).toBe('partial-err\n')
    const view = (await (await api.fetch(`/v1/jobs/${id}`, { key: KEY_A })).json()) as Job
    expect(view.state).toBe('interrupted')
    expect(view.partialOutput).toEqual(result.partialOutput)
  }, 240_000)
})
