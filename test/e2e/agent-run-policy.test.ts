import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import type { ConfigInput } from '../../src/config/schema.js'
import { startFakeDaytona } from '../fakes/daytona/index.js'
import type { FakeDaytona } from '../fakes/daytona/index.js'
import { OPENAI_TEST_KEY, chatCompletion, startOpenAIServer } from '../fakes/model-servers/openai-server.js'
import type { OpenAIFakeServer } from '../fakes/model-servers/openai-server.js'
import {
  configDir,
  fleetConfig,
  removeScope,
  startSbxServer,
  startSbxWorker,
  uniqueName,
} from '../support/sbx-cli.js'
import type { SbxServer } from '../support/sbx-cli.js'

/**
 * An agent run (POST /v1/agent-runs) whose shell tool routes to the failover policy `burst` (the
 * Daytona fake, then Docker): the first call's create on Daytona is answered 429 and the call fails
 * over to Docker, the second lands on Daytona; the run's `sandboxSeconds` has both providers, its
 * `toolCalls` and the AFTER_TOOL_CALL events name the provider that ran each call. Through `sbx serve`
 * and through a fleet (`sbx api` + `sbx worker` + `sbx worker --agent`).
 */
const env = (d: FakeDaytona) => ({
  RUNPOL_MODEL_KEY: OPENAI_TEST_KEY,
  DAYTONA_API_KEY: d.apiKey,
  DAYTONA_API_URL: d.apiUrl,
})

let daytona: FakeDaytona
let model: OpenAIFakeServer

beforeAll(async () => {
  daytona = await startFakeDaytona()
  model = await startOpenAIServer()
}, 60_000)

afterAll(async () => {
  await model?.close()
  await daytona?.close()
}, 60_000)

function configOf(): Partial<ConfigInput> {
  return {
    models: {
      default: {
        kind: 'openai-compatible',
        model: 'gpt-fake',
        baseURL: model.baseURL,
        apiKeyEnv: 'RUNPOL_MODEL_KEY',
      },
    },
    profiles: { dt: { provider: 'daytona', snapshot: 'sbx-test', defaultTimeoutMs: 20_000 } },
    routing: {
      policies: {
        burst: {
          mode: 'failover',
          candidates: [
            { provider: 'daytona', profile: 'dt' },
            { provider: 'docker', profile: 'default' },
          ],
        },
      },
      shell: { providerId: 'burst', profile: 'auto' },
    },
  } as Partial<ConfigInput>
}

interface RunView {
  id: string
  state: string
  output?: string
  sandboxSeconds?: Record<string, number>
  toolCalls?: { name: string; routed: boolean; provider?: string; error?: string }[]
}

const bash = (id: string, command: string) =>
  chatCompletion({ toolCalls: [{ id, name: 'bash', arguments: JSON.stringify({ command }) }] })

/** Runs the scenario against an API: returns nothing, asserts everything. */
async function runThroughPolicy(api: SbxServer): Promise<void> {
  const before = model.requests.length
  model.reply(bash('c1', 'echo first'), bash('c2', 'echo second'), chatCompletion({ content: 'both ran' }))
  // One 429 for the first create: the first call fails over, the second finds Daytona healthy.
  daytona.faults.rateLimitCreates(1, 1)
  const res = await api.post('/v1/agent-runs', { input: 'run two commands' })
  expect(res.status).toBe(202)
  const { id } = (await res.json()) as RunView
  const stream = await api.fetch(`/v1/agent-runs/${id}/events`, { signal: AbortSignal.timeout(120_000) })
  const text = await stream.text()
  expect(text).toContain('event: end')
  const run = (await (await api.fetch(`/v1/agent-runs/${id}`)).json()) as RunView
  expect(run, JSON.stringify(run)).toMatchObject({ state: 'completed', output: 'both ran' })

  // The routed results name the provider that ran each call.
  expect(run.toolCalls).toEqual([
    expect.objectContaining({ name: 'bash', routed: true, provider: 'docker' }),
    expect.objectContaining({ name: 'bash', routed: true, provider: 'daytona' }),
  ])
  // Sandbox time per provider that ran the calls (never under the policy's name).
  expect(Object.keys(run.sandboxSeconds ?? {}).sort()).toEqual(['daytona', 'docker'])
  for (const s of Object.values(run.sandboxSeconds ?? {})) expect(s).toBeGreaterThan(0)
  // The lifecycle stream says who ran it and which policy chose.
  const after = [...text.matchAll(/^data: (.*)$/gm)]
    .map((m) => JSON.parse(m[1] ?? '{}') as { type?: string; attributes?: Record<string, unknown> })
    .filter((e) => e.type === 'AFTER_TOOL_CALL')
  expect(after.map((e) => [e.attributes?.['provider'], e.attributes?.['policy']])).toEqual([
    ['docker', 'burst'],
    ['daytona', 'burst'],
  ])
  // The model saw both outputs.
  const last = model.requests[before + 2]?.body as { messages: { role: string; content: string }[] }
  const tools = last.messages.filter((m) => m.role === 'tool').map((m) => m.content)
  expect(tools[0]).toContain('first')
  expect(tools[1]).toContain('second')
}

describe('an agent run through a failover policy, sbx serve', () => {
  const scope = uniqueName('runpol-serve')
  let api: SbxServer
  beforeAll(async () => {
    api = await startSbxServer('serve', {
      config: { ...configOf(), queue: { prefix: scope } },
      env: env(daytona),
    })
  }, 180_000)
  afterAll(async () => {
    await api?.stop()
    await removeScope(scope)
  }, 120_000)

  test('the first call fails over to Docker, the second runs on Daytona; usage per provider', async () => {
    await runThroughPolicy(api)
  }, 180_000)
})

describe('an agent run through a failover policy, sbx api + sbx worker + sbx worker --agent', () => {
  const scope = uniqueName('runpol-fleet')
  const started: { stop(): Promise<void> }[] = []
  let api: SbxServer
  beforeAll(async () => {
    const config = fleetConfig(scope, configOf())
    const cwd = configDir(config)
    api = await startSbxServer('api', { config, cwd, env: env(daytona) })
    started.push(api)
    started.push(await startSbxWorker({ config, cwd, env: env(daytona) }))
    started.push(await startSbxWorker({ config, cwd, env: env(daytona), args: ['--agent'] }))
  }, 180_000)
  afterAll(async () => {
    for (const s of started.reverse()) await s.stop()
    await removeScope(scope)
  }, 120_000)

  test('the same run through the fleet: failover, usage per provider, providers named', async () => {
    await runThroughPolicy(api)
  }, 180_000)
})
