import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import type { ConfigInput } from '../../src/config/schema.js'
import { OPENAI_TEST_KEY, chatCompletion, startOpenAIServer } from '../fakes/model-servers/openai-server.js'
import type { OpenAIFakeServer } from '../fakes/model-servers/openai-server.js'
import { RedisServer } from '../support/redis-server.js'
import { FLEET_DRIVER } from '../support/redis.js'
import { startSbxServer, startSbxWorker, uniqueName } from '../support/sbx-cli.js'
import type { LineChild, SbxServer } from '../support/sbx-cli.js'

/*
 * An agent run accepted by the fleet (`sbx api`, child process, on the test's own redis-server with
 * append-only persistence fsynced on every write) while no agent worker is connected survives Redis
 * being SIGKILLed and restarted: the agent worker started afterwards runs it. A run submitted while
 * Redis is away is refused (503), not silently dropped.
 */
const prefix = uniqueName('ragent')
const env = { RAGENT_MODEL_KEY: OPENAI_TEST_KEY }
let redis: RedisServer
let model: OpenAIFakeServer
let api: SbxServer
const children: { stop(): Promise<void> }[] = []

function config(): ConfigInput {
  return {
    queue: { driver: FLEET_DRIVER, redisUrl: redis.url, prefix },
    models: {
      default: {
        kind: 'openai-compatible',
        model: 'gpt-fake',
        baseURL: model.baseURL,
        apiKeyEnv: 'RAGENT_MODEL_KEY',
      },
    },
  } as ConfigInput
}

beforeAll(async () => {
  redis = await RedisServer.start()
  model = await startOpenAIServer()
  api = await startSbxServer('api', { config: config(), env })
  children.push(api)
}, 180_000)

afterAll(async () => {
  if (redis && !redis.running) await redis.launch()
  for (const c of children.reverse()) await c.stop()
  await model?.close()
  await redis?.destroy()
}, 120_000)

interface RunView {
  id: string
  state: string
  output?: string
  error?: { code: string; message: string }
}

describe(`agent runs across a Redis restart (queue driver ${FLEET_DRIVER})`, () => {
  test('a run queued before Redis went down runs once it is back; one sent meanwhile is refused', async () => {
    // Under `redis` no queue is a BullMQ queue: there is no dashboard (docs/deploy.md).
    if (FLEET_DRIVER === 'redis') expect((await api.fetch('/admin/queues')).status).toBe(501)
    const res = await api.post('/v1/agent-runs', { input: 'survive the restart' })
    expect(res.status).toBe(202)
    const queued = (await res.json()) as RunView
    expect(queued.state).toBe('queued')

    await redis.kill9()
    const refused = await api.post('/v1/agent-runs', { input: 'while Redis is away' })
    expect(refused.status).toBe(503)
    await redis.launch()

    model.reply(chatCompletion({ content: 'still here' }))
    const agent: LineChild = await startSbxWorker({ config: config(), env, args: ['--agent'] })
    children.push(agent)
    // The API reconnects on its own; the event stream ends with the run.
    let events: Response | undefined
    for (let i = 0; i < 50; i++) {
      events = await api.fetch(`/v1/agent-runs/${queued.id}/events`, { signal: AbortSignal.timeout(60_000) })
      if (events.status !== 503) break
      await new Promise((r) => setTimeout(r, 200))
    }
    expect(events?.status).toBe(200)
    expect(await events?.text()).toContain('event: end')
    const run = (await (await api.fetch(`/v1/agent-runs/${queued.id}`)).json()) as RunView
    expect(run, JSON.stringify(run)).toMatchObject({ state: 'completed', output: 'still here' })
    expect(model.requests.length).toBe(1)
  }, 180_000)
})
