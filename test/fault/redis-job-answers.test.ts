import { readdirSync, statSync, truncateSync } from 'node:fs'
import { join } from 'node:path'
import { performance } from 'node:perf_hooks'
import { setTimeout as delay } from 'node:timers/promises'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { openJobEvents } from '../support/job-stream.js'
import type { EventStream } from '../support/job-stream.js'
import {
  configDir,
  fleetConfig,
  removeScopeContainers,
  startSbxServer,
  startSbxWorker,
  uniqueName,
} from '../support/sbx-cli.js'
import type { LineChild, SbxServer } from '../support/sbx-cli.js'
import { RedisServer } from '../support/redis-server.js'
import { FLEET_DRIVER } from '../support/redis.js'

/*
 * `sbx api` + `sbx worker` as child processes on the test's own redis-server, which the test SIGKILLs,
 * restarts and (to stand for the writes an `appendfsync everysec` Redis loses on a host crash) cuts
 * back. Once a job is accepted, its answer is the job — completed, or `unknown` saying it may have
 * run — never a 503 or 404 that reads as "not accepted"; while nothing can be accepted, every
 * submission is a 503 with Retry-After.
 */

const KEY = 'redis-job-answers-key-0123456789abcdef'
const prefix = uniqueName('rja')

interface Job {
  id: string
  state: string
  result?: { stdout: string }
  error?: { code: string; message: string }
  output?: string
}

let redis: RedisServer | undefined
let api: SbxServer | undefined
let worker: LineChild | undefined

beforeAll(async () => {
  redis = await RedisServer.start()
  const config = fleetConfig(prefix, {
    apiKeys: [{ key: KEY, tenant: 'acme' }],
    queue: { redisUrl: redis.url },
    // Tool calls route here: a 1 s timeout, so a tool call's wait lasts 31 s.
    profiles: { quick: { provider: 'docker', defaultTimeoutMs: 1_000 } },
    routing: { shell: { providerId: 'docker', profile: 'quick' } },
  })
  const dir = configDir(config)
  api = await startSbxServer('api', { config, cwd: dir })
  worker = await startSbxWorker({ config, cwd: dir })
}, 180_000)

afterAll(async () => {
  try {
    if (redis && !redis.running) await redis.launch()
    await worker?.stop()
    await api?.stop()
  } finally {
    await worker?.kill()
    await api?.kill()
    await redis?.destroy()
    await removeScopeContainers(prefix)
  }
}, 120_000)

const srv = (): SbxServer => api as SbxServer
const run = (command: string, sessionId?: string) => ({
  provider: 'docker',
  profile: 'default',
  command,
  ...(sessionId ? { sessionId } : {}),
})

/** Waits until `/readyz` answers 200 (Redis back and the API reconnected). */
async function ready(): Promise<void> {
  while ((await srv().fetch('/readyz')).status !== 200) await delay(100)
}

/**
 * Opens a job's event stream. Just after Redis is back the API's pub/sub connection may still be
 * reconnecting (`/readyz` checks the command connection), and the stream answers 503 until it has.
 */
async function events(id: string): Promise<EventStream> {
  for (let attempt = 0; ; attempt += 1) {
    try {
      return await openJobEvents(srv(), id, KEY)
    } catch (err) {
      if (attempt >= 100 || !String(err).includes('HTTP 503')) throw err
      await delay(100)
    }
  }
}

/** The AOF file Redis appends to now (Redis 7: `appendonlydir/<name>.<n>.incr.aof`, highest n). */
function liveAof(dir: string): string {
  const aofDir = join(dir, 'appendonlydir')
  const incr = readdirSync(aofDir)
    .filter((f) => f.endsWith('.incr.aof'))
    .sort((a, b) => Number(/\.(\d+)\.incr\.aof$/.exec(b)?.[1]) - Number(/\.(\d+)\.incr\.aof$/.exec(a)?.[1]))
  if (!incr[0]) throw new Error(`no incremental AOF in ${aofDir}`)
  return join(aofDir, incr[0])
}

describe(`answers of accepted jobs through Redis faults (queue driver ${FLEET_DRIVER})`, () => {
  test('a Redis SIGKILL while a POST waits: the answer is the job, completed once Redis is back', async () => {
    const server = redis as RedisServer
    const res = await srv().post('/v1/exec', run('echo begun; sleep 3; echo survived', 'blip'), { key: KEY })
    expect(res.status).toBe(200)
    const id = res.headers.get('x-job-id') as string
    const stream = await events(id)
    await stream.next((e) => e.event === 'stdout' && e.data.includes('begun'))
    stream.close()
    const killedAt = await server.kill9()
    const backAt = await server.launch()
    const job = JSON.parse(await res.text()) as Job
    console.log(
      `[redis-job-answers] blip: Redis down ${Math.round(backAt - killedAt)} ms; the waiting POST answered ${job.state} ${Math.round(performance.now() - backAt)} ms after it was back`,
    )
    expect(job, JSON.stringify(job)).toMatchObject({ id, state: 'completed' })
    expect(job.result?.stdout).toBe('begun\nsurvived\n')
    await ready()
  }, 120_000)

  test('while Redis is away nothing is accepted: exec and tool calls, with a session or without, answer 503 with Retry-After', async () => {
    const server = redis as RedisServer
    await server.kill9()
    const answers = {
      exec: await srv().post('/v1/exec', run('echo during'), { key: KEY }),
      execNoWait: await srv().post('/v1/exec?wait=false', run('echo during'), { key: KEY }),
      toolCall: await srv().post(
        '/v1/tool-calls',
        { name: 'bash', arguments: { command: 'echo during' } },
        { key: KEY },
      ),
      toolCallInSession: await srv().post(
        '/v1/tool-calls',
        { name: 'bash', arguments: { command: 'echo during' }, sessionId: 'tc' },
        { key: KEY },
      ),
    }
    for (const [name, res] of Object.entries(answers)) {
      const body = (await res.json()) as Job
      expect(res.status, `${name}: ${JSON.stringify(body)}`).toBe(503)
      expect(body.error?.code, name).toBe('QUEUE_UNAVAILABLE')
      expect(body.error?.message, name).toMatch(/Redis/)
      // An exec says that nothing was accepted (a retry is safe).
      if (name.startsWith('exec')) expect(body.error?.message, name).toMatch(/not accepted/)
      expect(res.headers.get('retry-after'), name).toBe('2')
      expect(res.headers.get('x-job-id'), name).toBeNull()
    }
    await server.launch()
    await ready()
    const after = await srv().post(
      '/v1/tool-calls',
      { name: 'bash', arguments: { command: 'echo after' } },
      { key: KEY },
    )
    const evaluation = (await after.json()) as { output: string; job?: { id: string; state: string } }
    expect(after.status).toBe(200)
    expect(evaluation.output).toContain('after')
    expect(evaluation.job?.state).toBe('completed')
    const view = (await (await srv().fetch(`/v1/jobs/${evaluation.job?.id}`, { key: KEY })).json()) as Job
    expect(view.result?.stdout).toBe('after\n')
  }, 120_000)

  test('Redis away past the wait: the POST answers `unknown` (accepted, result unreadable), and GET finds the job once Redis is back', async () => {
    const server = redis as RedisServer
    // The wait of a waiting POST lasts the command's timeout + 30 s: 33 s here. The command outlasts
    // the answer's grace (ANSWER_GRACE_MS), so the status comes while it runs.
    const res = await srv().post(
      '/v1/exec',
      { ...run('echo begun; sleep 2; echo late', 'long'), timeoutMs: 3_000 },
      { key: KEY },
    )
    expect(res.status).toBe(200)
    const id = res.headers.get('x-job-id') as string
    const stream = await events(id)
    await stream.next((e) => e.event === 'stdout' && e.data.includes('begun'))
    stream.close()
    const killedAt = await server.kill9()
    const job = JSON.parse(await res.text()) as Job
    console.log(
      `[redis-job-answers] Redis away: the waiting POST answered ${job.state} ${Math.round(performance.now() - killedAt)} ms after the kill: ${job.error?.message}`,
    )
    expect(job.id).toBe(id)
    expect(job.state, JSON.stringify(job)).toBe('unknown')
    expect(job.error?.code).toBe('QUEUE_UNAVAILABLE')
    expect(job.error?.message).toContain(`Accepted as job ${id}`)
    expect(job.error?.message).toContain(`GET /v1/jobs/${id}`)
    expect(job.error?.message).toMatch(/Redis stayed unreachable/)
    await server.launch()
    await ready()
    const stream2 = await events(id)
    const final = JSON.parse((await stream2.next((e) => e.event === 'result', 60_000)).data) as Job
    stream2.close()
    expect(['completed', 'interrupted'], JSON.stringify(final)).toContain(final.state)
  }, 180_000)

  test('a tool call accepted before Redis went away, past its wait: 200 naming the job, state `unknown`', async () => {
    const server = redis as RedisServer
    const answer = srv().post(
      '/v1/tool-calls',
      { name: 'bash', arguments: { command: 'echo begun; sleep 0.5; echo late' }, sessionId: 'tc-long' },
      { key: KEY },
    )
    // The client learns the job only from the answer: find it as a lost client would, in the listing.
    let id: string | undefined
    while (!id) {
      const list = (await (await srv().fetch('/v1/jobs?sessionId=tc-long', { key: KEY })).json()) as {
        jobs: Job[]
      }
      id = list.jobs[0]?.id
      if (!id) await delay(50)
    }
    const stream = await events(id)
    await stream.next((e) => e.event === 'stdout' && e.data.includes('begun'))
    stream.close()
    const killedAt = await server.kill9()
    const res = await answer
    const evaluation = (await res.json()) as { output: string; job?: { id: string; state: string } }
    console.log(
      `[redis-job-answers] Redis away: the tool call answered ${res.status} ${Math.round(performance.now() - killedAt)} ms after the kill: ${JSON.stringify(evaluation.job)} ${evaluation.output}`,
    )
    expect(res.status, JSON.stringify(evaluation)).toBe(200)
    expect(evaluation.job).toEqual({ id, state: 'unknown' })
    expect(evaluation.output).toContain(`error: QUEUE_UNAVAILABLE: Accepted as job ${id}`)
    expect(evaluation.output).toMatch(/may have run/)
    await server.launch()
    await ready()
  }, 180_000)

  test('an accepted job lost by Redis (its AOF cut back): the waiting POST and the SSE result answer `unknown`, it may have run; GET says it may be lost', async () => {
    const server = redis as RedisServer
    const aof = liveAof(server.dir)
    const before = statSync(aof).size
    const res = await srv().post('/v1/exec', run('echo begun; sleep 20; echo end'), { key: KEY })
    expect(res.status).toBe(200)
    const id = res.headers.get('x-job-id') as string
    const stream = await events(id)
    await stream.next((e) => e.event === 'stdout' && e.data.includes('begun'))
    // What an fsync window loses on a host crash: every write since `before`, the job's among them.
    await server.kill9()
    truncateSync(aof, before)
    const backAt = await server.launch()
    const job = JSON.parse(await res.text()) as Job
    console.log(
      `[redis-job-answers] AOF cut back to its size before the submit: ` +
        `the waiting POST answered ${job.state} ${Math.round(performance.now() - backAt)} ms after Redis was back: ${job.error?.message}`,
    )
    expect(job.id).toBe(id)
    expect(job.state, JSON.stringify(job)).toBe('unknown')
    expect(job.error?.message).toMatch(/Accepted as job/)
    expect(job.error?.message).toMatch(/may have run/)
    // The event stream open across the loss ends with the same honest result.
    const streamed = JSON.parse((await stream.next((e) => e.event === 'result')).data) as Job
    stream.close()
    expect(streamed).toMatchObject({ id, state: 'unknown', error: { code: 'NOT_FOUND' } })
    await ready()
    const get = await srv().fetch(`/v1/jobs/${id}`, { key: KEY })
    const body = (await get.json()) as Job
    expect(get.status).toBe(404)
    expect(body.error?.message).toMatch(/lost by Redis/)
    expect(body.error?.message).toMatch(/may have run/)
  }, 120_000)
})
