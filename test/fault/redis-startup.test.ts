import { randomUUID } from 'node:crypto'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { performance } from 'node:perf_hooks'
import { afterAll, afterEach, beforeAll, describe, expect, test } from 'vitest'
import { loadConfig } from '../../src/config/load.js'
import { AppError } from '../../src/errors.js'
import { createLogger } from '../../src/logger.js'
import { createRuntime } from '../../src/runtime/create-runtime.js'
import { LineChild, SBX } from '../support/redis-child.js'
import { freePort, RedisServer } from '../support/redis-server.js'

/*
 * Redis down when the service starts. The library call (createRuntime) fails fast with
 * QUEUE_UNAVAILABLE naming the URL; the long-running commands (`sbx worker`, `sbx serve`) wait for
 * Redis with backoff, one line per attempt, and either start once Redis appears or exit 1 with a
 * clear message after `--redis-wait` — never a crash loop, never a silent hang.
 */

const prefix = `rstart${randomUUID().slice(0, 8)}`
let dir: string
let config: string
let children: LineChild[] = []
let redis: RedisServer | undefined

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'sbx-redis-startup-'))
  config = join(dir, 'sandbox-router.config.json')
  writeFileSync(config, JSON.stringify({ queue: { prefix } }))
})

afterEach(async () => {
  await Promise.all(children.map((c) => c.kill()))
  children = []
  await redis?.destroy()
  redis = undefined
})

afterAll(() => rmSync(dir, { recursive: true, force: true }))

/** `sbx <args>` in the temporary directory, with a fixed API key (nothing written to the repository). */
function sbx(name: string, args: string[]): LineChild {
  const c = LineChild.spawn(name, [SBX, ...args], { SBX_API_KEY: 'startup-key-0123456789abcdef' }, dir)
  children.push(c)
  return c
}

const WAITING =
  /^sbx: waiting for Redis \(attempt (\d+) failed; retrying in ([\d.]+) s, giving up after (\d+) s\): cannot reach Redis at (\S+)/

describe('Redis down at start-up', () => {
  test('createRuntime fails fast with QUEUE_UNAVAILABLE naming the URL', async () => {
    const url = `redis://127.0.0.1:${await freePort()}`
    const loaded = loadConfig({ cwd: dir, env: { REDIS_URL: url } })
    const t0 = performance.now()
    const err = await createRuntime(loaded, {
      role: 'worker',
      logger: createLogger({ level: 'silent' }),
    }).catch((e: unknown) => e)
    const ms = performance.now() - t0
    console.log(
      `[redis-startup] createRuntime with Redis down: ${Math.round(ms)} ms: ${(err as Error).message}`,
    )
    expect(err).toBeInstanceOf(AppError)
    expect((err as AppError).code).toBe('QUEUE_UNAVAILABLE')
    expect((err as AppError).retryable).toBe(true)
    expect((err as AppError).message).toContain(url)
    expect((err as AppError).message).toMatch(/start Redis or fix REDIS_URL/)
    expect(ms).toBeLessThan(6_000)
  })

  test('sbx worker retries with backoff, a line per attempt, then exits 1 with a clear message', async () => {
    const url = `redis://127.0.0.1:${await freePort()}`
    const worker = sbx('sbx worker', ['worker', '--config', config, '--redis', url, '--redis-wait', '5'])
    const first = await worker.next((l) => WAITING.test(l.text), 120_000)
    const [code] = await worker.exited
    const attempts = worker.lines.filter((l) => WAITING.test(l.text))
    const last = worker.lines.find((l) => l.text.startsWith('error:'))
    const waitedMs = (last?.at ?? Infinity) - first.at
    console.log(
      `[redis-startup] sbx worker, Redis down: ${attempts.length} retry lines over ${Math.round(waitedMs)} ms, ` +
        `exit ${code}\n  ${attempts.map((l) => l.text.slice(0, 110)).join('\n  ')}\n  ${last?.text ?? '(no error line)'}`,
    )
    expect(code).toBe(1)
    // Backoff, not a spin: 0.5, 1, 2, then the rest of the 5 s.
    const delays = attempts.map((l) => Number(WAITING.exec(l.text)?.[2]))
    expect(attempts.length).toBeGreaterThanOrEqual(3)
    expect(attempts.length).toBeLessThanOrEqual(6)
    expect(delays.slice(0, 3)).toEqual([0.5, 1, 2])
    for (const l of attempts) expect(WAITING.exec(l.text)?.[4]).toContain(url)
    expect(last?.text).toMatch(
      new RegExp(
        `^error: QUEUE_UNAVAILABLE: gave up waiting for Redis at ${url}.* after the 5 s allowed \\(\\d+ attempts in \\d+ s\\)`,
      ),
    )
    // Bounded: the allowed time plus one connect attempt.
    expect(waitedMs).toBeLessThan(5_000 + 6_000)
    // A clear message, not a crash: no stack trace.
    expect(worker.lines.filter((l) => /^\s+at /.test(l.text))).toEqual([])
  }, 180_000)

  test('sbx serve waits for Redis, starts once it answers, and is ready', async () => {
    const port = await freePort()
    const url = `redis://127.0.0.1:${port}`
    const serve = sbx('sbx serve', [
      'serve',
      '--config',
      config,
      '--redis',
      url,
      '--port',
      '0',
      '--host',
      '127.0.0.1',
    ])
    await serve.next((l) => WAITING.test(l.text), 120_000)
    // Redis appears while the service waits.
    redis = await RedisServer.start({ port })
    const upAt = performance.now()
    const listening = await serve.next((l) => l.text.includes('sandbox-router listening on'), 60_000)
    const startedMs = listening.at - upAt
    const base = /listening on (http:\/\/\S+)/.exec(listening.text)?.[1]
    const ready = await fetch(`${base}/readyz`)
    const body = (await ready.json()) as { checks: Record<string, { ok: boolean }> }
    console.log(
      `[redis-startup] sbx serve: Redis up -> listening in ${Math.round(startedMs)} ms; /readyz ${ready.status} ${JSON.stringify(body.checks)}`,
    )
    expect(ready.status).toBe(200)
    expect(body.checks['redis']).toEqual({ ok: true })
    expect(listening.text).toContain('fleet mode')
    await serve.stop()
    expect(await serve.exited).toEqual([0, null])
  }, 180_000)
})
