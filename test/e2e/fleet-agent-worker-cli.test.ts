import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import type { ConfigInput } from '../../src/config/schema.js'
import { OPENAI_TEST_KEY, chatCompletion, startOpenAIServer } from '../fakes/model-servers/openai-server.js'
import { hang } from '../fakes/model-servers/scripted-server.js'
import type { OpenAIFakeServer } from '../fakes/model-servers/openai-server.js'
import {
  configDir,
  fleetConfig,
  runSbx,
  startSbxServer,
  startSbxWorker,
  uniqueName,
  removeScope,
} from '../support/sbx-cli.js'
import { LineChild, SBX } from '../support/sbx-cli.js'
import type { SbxServer } from '../support/sbx-cli.js'

/**
 * F1: the fleet as users start it, `sbx api` + `sbx worker` + `sbx worker --agent` as child processes
 * on the shared Redis, runs an agent run whose shell call goes through the exec workers. Before any
 * agent worker is connected, the API says so (the 202 answer, the run view and `/readyz`).
 */
const prefix = uniqueName('fagent')
const env = { FAGENT_MODEL_KEY: OPENAI_TEST_KEY }
let model: OpenAIFakeServer
let api: SbxServer
const started: { stop(): Promise<void> }[] = []

/** The fleet's config: this test's prefix and the fake model (its key from FAGENT_MODEL_KEY). */
function fleetConfigWithModel(): ConfigInput {
  return fleetConfig(prefix, {
    models: {
      default: {
        kind: 'openai-compatible',
        model: 'gpt-fake',
        baseURL: model.baseURL,
        apiKeyEnv: 'FAGENT_MODEL_KEY',
      },
    },
  })
}

interface RunView {
  id: string
  state: string
  output?: string
  warning?: string
  toolCalls?: { name: string; routed: boolean; error?: string }[]
  error?: { code: string; message: string }
}
interface Ready {
  checks: Record<string, { ok: boolean; exec?: number; agent?: number; warning?: string }>
}

beforeAll(async () => {
  model = await startOpenAIServer()
  api = await startSbxServer('api', { config: fleetConfigWithModel(), env })
  started.push(api)
}, 180_000)

afterAll(async () => {
  for (const s of started.reverse()) await s.stop()
  await model?.close()
  await removeScope(prefix)
}, 120_000)

/** Reads a run's event stream to its `end` event (the run is final then). */
async function untilFinal(id: string): Promise<RunView> {
  const res = await api.fetch(`/v1/agent-runs/${id}/events`, { signal: AbortSignal.timeout(90_000) })
  expect(res.status).toBe(200)
  const text = await res.text()
  expect(text).toContain('event: end')
  return (await (await api.fetch(`/v1/agent-runs/${id}`)).json()) as RunView
}

describe('sbx worker --agent in a fleet of child processes', () => {
  let runId = ''

  test('with no agent worker connected, the 202 answer, the run view and /readyz say so', async () => {
    const res = await api.post('/v1/agent-runs', { input: 'run the command', sessionId: 'fa-1' })
    expect(res.status).toBe(202)
    const queued = (await res.json()) as RunView
    runId = queued.id
    expect(queued.state).toBe('queued')
    expect(queued.warning).toMatch(/no agent-run worker is connected.*sbx worker --agent/)
    const view = (await (await api.fetch(`/v1/agent-runs/${runId}`)).json()) as RunView
    expect(view).toMatchObject({ state: 'queued', warning: queued.warning })
    const ready = (await (await fetch(`${api.url}/readyz`)).json()) as Ready
    expect(ready.checks['workers']).toMatchObject({ ok: true, exec: 0, agent: 0 })
    expect(ready.checks['workers']?.warning).toContain('sbx worker --agent')
  })

  test('`sbx agent run` prints the warning while the run waits', async () => {
    const cli = LineChild.spawn('sbx agent run', [SBX, 'agent', 'run', 'hello', '--url', api.url], {
      SBX_API_KEY: api.key,
    })
    try {
      const queued = await cli.next((l) => l.stream === 'stderr' && /^run \S+ queued/.test(l.text), 60_000)
      const warning = await cli.next((l) => l.stream === 'stderr' && l.text.startsWith('warning:'), 30_000)
      expect(warning.text).toMatch(/no agent-run worker is connected.*sbx worker --agent/)
      // Cancelled while still queued: the agent worker started below skips it.
      const id = /^run (\S+) queued/.exec(queued.text)?.[1] ?? ''
      expect((await api.fetch(`/v1/agent-runs/${id}`, { method: 'DELETE' })).status).toBe(200)
    } finally {
      await cli.kill()
    }
  })

  test('`sbx worker` + `sbx worker --agent` pick the run up; its shell output reaches the model', async () => {
    model.reply(
      chatCompletion({
        toolCalls: [
          {
            id: 'c1',
            name: 'bash',
            arguments: JSON.stringify({ command: 'echo agent-$((6*7)) | tee out.txt' }),
          },
        ],
      }),
      chatCompletion({ content: 'ran it' }),
    )
    const config = fleetConfigWithModel()
    const exec: LineChild = await startSbxWorker({ config })
    started.push(exec)
    const agent: LineChild = await startSbxWorker({ config, env, args: ['--agent', '--concurrency', '2'] })
    started.push(agent)
    // The ready line tells what it consumes.
    const ready = agent.lines.find((l) => /consuming/.test(l.text))?.text ?? ''
    expect(ready).toMatch(/consuming agent runs \(queue sbx-agent-runs, concurrency 2; models: default\)/)

    const run = await untilFinal(runId)
    expect(run, JSON.stringify(run)).toMatchObject({ state: 'completed', output: 'ran it' })
    expect(run.warning).toBeUndefined()
    expect(run.toolCalls).toEqual([expect.objectContaining({ name: 'bash', routed: true })])
    // The shell ran in the session's sandbox (through the exec worker) and its output went to the model.
    const second = model.requests[1]?.body as { messages: { role: string; content: string }[] }
    expect(second.messages.find((m) => m.role === 'tool')?.content).toContain('agent-42')
    const cat = await api.post('/v1/exec', {
      provider: 'docker',
      profile: 'default',
      sessionId: 'fa-1',
      command: 'cat out.txt',
    })
    expect(((await cat.json()) as { result?: { stdout: string } }).result?.stdout).toBe('agent-42\n')

    const readyz = (await (await fetch(`${api.url}/readyz`)).json()) as Ready
    expect(readyz.checks['workers']).toEqual({ ok: true, exec: 1, agent: 1 })
  })
})

/**
 * Stops the earlier tests' workers, starts one agent worker (the only one that may take the run),
 * and submits a run whose model call hangs; resolves once the worker is inside that call.
 */
async function runInModelCall(sessionId: string): Promise<{ worker: LineChild; id: string; before: number }> {
  for (const s of started.splice(1)) await s.stop()
  const worker: LineChild = await startSbxWorker({ config: fleetConfigWithModel(), env, args: ['--agent'] })
  started.push(worker)
  model.reply(hang)
  const before = model.requests.length
  const res = await api.post('/v1/agent-runs', { input: 'stall', sessionId })
  expect(res.status).toBe(202)
  const { id } = (await res.json()) as RunView
  await model.requestAt(before)
  return { worker, id, before }
}

describe('an agent worker that dies mid-run', () => {
  test('its run ends JOB_INTERRUPTED within seconds on another agent worker, not after 30 s', async () => {
    const { worker: doomed, id, before } = await runInModelCall('fa-2')
    // The worker is inside the model call when it dies.
    await doomed.kill()
    const next: LineChild = await startSbxWorker({ config: fleetConfigWithModel(), env, args: ['--agent'] })
    started.push(next)
    const t0 = performance.now()
    const run = await untilFinal(id)
    const ms = performance.now() - t0
    expect(run, JSON.stringify(run)).toMatchObject({ state: 'failed', error: { code: 'JOB_INTERRUPTED' } })
    console.log(
      `[fleet-agent] dead agent worker's run final ${ms.toFixed(0)} ms after a new agent worker was ready`,
    )
    expect(ms).toBeLessThan(20_000)
    // Not run twice: the run's one model call was the dead worker's.
    expect(model.requests.length).toBe(before + 1)
  }, 120_000)
})

describe('a running agent run cancelled in the fleet', () => {
  test('DELETE aborts it on the agent worker holding it: the run ends cancelled within seconds', async () => {
    // The run is inside its model call on the agent worker.
    const { id, before } = await runInModelCall('fa-3')
    const running = (await (await api.fetch(`/v1/agent-runs/${id}`)).json()) as RunView
    expect(running.state).toBe('running')
    const t0 = performance.now()
    expect((await api.fetch(`/v1/agent-runs/${id}`, { method: 'DELETE' })).status).toBe(200)
    const run = await untilFinal(id)
    const ms = performance.now() - t0
    expect(run, JSON.stringify(run)).toMatchObject({ state: 'cancelled', error: { code: 'JOB_CANCELLED' } })
    console.log(`[fleet-agent] running run cancelled: final ${ms.toFixed(0)} ms after the DELETE`)
    expect(ms).toBeLessThan(10_000)
    expect(model.requests.length).toBe(before + 1)
    // The worker goes on taking runs.
    model.reply(chatCompletion({ content: 'after the cancel' }))
    const next = (await (await api.post('/v1/agent-runs', { input: 'again' })).json()) as RunView
    expect(await untilFinal(next.id)).toMatchObject({ state: 'completed', output: 'after the cancel' })
  }, 120_000)
})

describe('sbx worker --agent refuses a config without models', () => {
  test('a usage error saying what to add', async () => {
    const cwd = configDir(fleetConfig(uniqueName('fagentnm')))
    // Before the fix this started a worker that never exited: the timeout ends it within the test.
    const r = await runSbx(['worker', '--agent'], { cwd, timeoutMs: 20_000 })
    expect(r.code).not.toBe(0)
    expect(r.stderr).toMatch(/add a `models` entry/)
  }, 60_000)
})
