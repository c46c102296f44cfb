import { execFile } from 'node:child_process'
import { chmodSync, mkdtempSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { promisify } from 'node:util'
import { randomUUID } from 'node:crypto'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { OPENAI_TEST_KEY, chatCompletion, startOpenAIServer } from '../fakes/model-servers/openai-server.js'
import type { OpenAIFakeServer } from '../fakes/model-servers/openai-server.js'
import { ROOT } from '../support/redis-child.js'
import { freePort } from '../support/redis-server.js'
import { removeScopeContainers, runSbx, scopeContainers } from '../support/sbx-cli.js'
import { ComposeStack, relay, socketGid, until } from '../support/compose-stack.js'

/**
 * The compose fleet as docs/deploy.md deploys it: images built locally (no registry), then
 * `docker-compose -f docker-compose.yml -f docker-compose.docker-engine.yml up -d --scale worker=2`
 * (Redis, the API, two exec workers, an agent-run worker) under a project name of its own, driven
 * over HTTP only: an exec, a session's files, an agent run against a fake model, a killed worker, and
 * `down -v` leaving nothing behind.
 */
const run = promisify(execFile)
const project = `sbxc${randomUUID().slice(0, 8)}`
// The fleet's queue prefix, which also labels the sandboxes its workers start (sandbox-router.scope).
const scope = project
const apiKey = `sbx_compose_${randomUUID().replace(/-/g, '')}`
let stack: ComposeStack
let model: OpenAIFakeServer
let modelRelay: { port: number; close(): Promise<void> } | undefined
let url = ''
let up = false

const call = (path: string, init: RequestInit = {}): Promise<Response> => {
  const headers = new Headers(init.headers)
  headers.set('authorization', `Bearer ${apiKey}`)
  if (typeof init.body === 'string') headers.set('content-type', 'application/json')
  return fetch(url + path, { ...init, headers, signal: init.signal ?? AbortSignal.timeout(120_000) })
}
interface Job {
  id: string
  state: string
  result?: { exitCode: number | null; stdout: string }
  error?: { code: string; message: string }
}
const exec = async (sessionId: string, command: string, wait = true): Promise<Job> => {
  const res = await call(`/v1/exec${wait ? '' : '?wait=false'}`, {
    method: 'POST',
    body: JSON.stringify({ provider: 'docker', profile: 'default', sessionId, command }),
  })
  expect([200, 202]).toContain(res.status)
  return (await res.json()) as Job
}
const workers = async (): Promise<{ exec: number; agent: number } | undefined> => {
  const r = (await (await fetch(`${url}/readyz`, { signal: AbortSignal.timeout(10_000) })).json()) as {
    checks?: Record<string, { exec?: number; agent?: number }>
  }
  const w = r.checks?.['workers']
  return w && typeof w.exec === 'number' && typeof w.agent === 'number'
    ? { exec: w.exec, agent: w.agent }
    : undefined
}

beforeAll(async () => {
  // 1. The images, as docs/deploy.md says: `sbx image build --compose` (setup, then the compose images;
  // each cached by its inputs, seconds when nothing changed).
  const built = await runSbx(['image', 'build', '--compose'], { cwd: ROOT, timeoutMs: 600_000 })
  expect(built.code, `${built.stdout}\n${built.stderr}`).toBe(0)
  const port = await freePort()
  url = `http://127.0.0.1:${port}`
  const configDir = mkdtempSync(join(tmpdir(), 'sbx-compose-'))
  // The containers run as uid 1000 and mount this directory read-only.
  chmodSync(configDir, 0o755)
  stack = new ComposeStack(project, {
    SBX_API_KEY: apiKey,
    DOCKER_SOCKET_GID: socketGid(),
    SBX_CONFIG_DIR: configDir,
    SBX_PORT: String(port),
    SBX_MODEL_API_KEY: OPENAI_TEST_KEY,
    LOG_LEVEL: 'info',
  })
  // 2. The service image (Docker's layer cache: seconds when nothing changed).
  await stack.compose(['build'], 600_000)
  // 3. The project's network exists before anything starts: the fake model listens on its gateway.
  await stack.compose(['up', '--no-start'])
  model = await startOpenAIServer()
  const gateway = await stack.gateway()
  modelRelay = await relay(gateway, Number(new URL(model.origin).port))
  const config = {
    queue: { prefix: scope },
    models: {
      default: {
        kind: 'openai-compatible',
        model: 'gpt-fake',
        baseURL: `http://${gateway}:${modelRelay.port}/v1`,
        apiKeyEnv: 'SBX_MODEL_API_KEY',
      },
    },
  }
  writeFileSync(join(configDir, 'sandbox-router.config.yaml'), JSON.stringify(config, null, 2), {
    mode: 0o644,
  })
  // 4. Up, as docs/deploy.md says.
  await stack.compose(['up', '-d', '--scale', 'worker=2'])
  up = true
  await until(
    'two exec workers and an agent worker connected',
    async () => {
      const w = await workers()
      return w && w.exec === 2 && w.agent === 1 ? w : undefined
    },
    120_000,
  ).catch(async (err: Error) => {
    throw new Error(`${err.message}\n${await stack.logs()}`)
  })
}, 900_000)

afterAll(async () => {
  if (stack && up) await stack.compose(['down', '-v', '--remove-orphans']).catch(() => undefined)
  await modelRelay?.close()
  await model?.close()
  await removeScopeContainers(scope)
}, 300_000)

describe('docker-compose fleet (API, 2 exec workers, agent worker, Redis) on this engine', () => {
  test('an exec runs in a session sandbox started by a worker on the host engine', async () => {
    const job = await exec('c-1', 'echo compose > a.txt; cat a.txt')
    expect(job, JSON.stringify(job)).toMatchObject({ state: 'completed', result: { stdout: 'compose\n' } })
    expect((await scopeContainers(scope)).length).toBeGreaterThanOrEqual(1)
  })

  test("a session's files: PUT then GET through the API container", async () => {
    const body = `data ${randomUUID()}\n`
    const put = await call('/v1/sessions/c-1/files?path=/workspace/upload.txt', { method: 'PUT', body })
    expect(put.status, await put.clone().text()).toBe(200)
    const get = await call('/v1/sessions/c-1/files?path=/workspace/upload.txt')
    expect(get.status).toBe(200)
    expect(await get.text()).toBe(body)
    // The command side sees the same file.
    expect((await exec('c-1', 'cat upload.txt')).result?.stdout).toBe(body)
  })

  test('an agent run: the agent worker calls the model, its shell runs on an exec worker', async () => {
    model.reply(
      chatCompletion({
        toolCalls: [
          { id: 'c1', name: 'bash', arguments: JSON.stringify({ command: 'echo from-$((40+2))' }) },
        ],
      }),
      chatCompletion({ content: 'done in compose' }),
    )
    const res = await call('/v1/agent-runs', {
      method: 'POST',
      body: JSON.stringify({ input: 'run it', sessionId: 'c-agent' }),
    })
    expect(res.status).toBe(202)
    const { id, warning } = (await res.json()) as { id: string; warning?: string }
    expect(warning).toBeUndefined()
    expect(await (await call(`/v1/agent-runs/${id}/events`)).text()).toContain('event: end')
    const runView = (await (await call(`/v1/agent-runs/${id}`)).json()) as Record<string, unknown>
    expect(runView, JSON.stringify(runView)).toMatchObject({ state: 'completed', output: 'done in compose' })
    const second = model.requests[1]?.body as { messages: { role: string; content: string }[] }
    expect(second.messages.find((m) => m.role === 'tool')?.content).toContain('from-42')
  })

  test('docker kill of one exec worker: a job in flight ends final, later jobs complete on the other', async () => {
    const [victim, survivor] = await stack.containers('worker')
    expect(victim && survivor).toBeTruthy()
    // c-2's sandbox exists before the kill. (A worker killed while it creates a sandbox leaves an
    // orphan that a live worker's reaper removes after its grace period: not what this test is about.)
    expect((await exec('c-2', 'true')).state).toBe('completed')
    const inFlight = await exec('c-2', 'sleep 2; echo slow', false)
    await run('docker', ['kill', victim ?? ''])
    await until(
      'the killed worker gone from the queue',
      async () => ((await workers())?.exec === 1 ? 1 : undefined),
      60_000,
    )
    const after = await Promise.all(
      Array.from({ length: 6 }, (_, i) => exec(i % 2 ? 'c-1' : 'c-2', `echo after-${i}`)),
    )
    for (const [i, job] of after.entries())
      expect(job, JSON.stringify(job)).toMatchObject({
        state: 'completed',
        result: { stdout: `after-${i}\n` },
      })
    // The job the victim may have held is not lost: it ends completed (or interrupted, fenced).
    const events = await (await call(`/v1/jobs/${inFlight.id}/events`)).text()
    expect(events).toContain('event: result')
    const final = (await (await call(`/v1/jobs/${inFlight.id}`)).json()) as Job
    expect(['completed', 'interrupted'], JSON.stringify(final)).toContain(final.state)
    // The files of the session survived the worker (they live in its sandbox, not in the worker).
    expect((await exec('c-1', 'cat a.txt')).result?.stdout).toBe('compose\n')
    // A killed container is not restarted (docker kill counts as a stop): the survivor ran all of it.
    const { stdout } = await run('docker', [
      'inspect',
      '-f',
      '{{.State.Status}} {{.RestartCount}}',
      victim ?? '',
    ])
    expect(stdout.trim()).toBe('exited 0')
    expect((await workers())?.exec).toBe(1)
  })

  test('sessions deleted and `down -v`: no container, network, volume or sandbox is left', async () => {
    for (const id of ['c-1', 'c-2', 'c-agent']) {
      const res = await call(`/v1/sessions/${id}`, { method: 'DELETE' })
      expect(res.status, `${id}: ${await res.clone().text()}`).toBe(200)
    }
    // Only the sessions' sandboxes were left, and DELETE removed them.
    expect(await scopeContainers(scope, true)).toEqual([])
    await stack.compose(['down', '-v', '--remove-orphans'])
    up = false
    expect(await stack.leftovers()).toEqual({ containers: [], networks: [], volumes: [] })
    expect(await scopeContainers(scope, true)).toEqual([])
  })
})
