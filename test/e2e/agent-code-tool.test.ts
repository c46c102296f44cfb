import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { OPENAI_TEST_KEY, chatCompletion, startOpenAIServer } from '../fakes/model-servers/openai-server.js'
import type { OpenAIFakeServer } from '../fakes/model-servers/openai-server.js'
import { removeScope, startSbxServer, uniqueName } from '../support/sbx-cli.js'
import type { SbxServer } from '../support/sbx-cli.js'

/*
 * The agent loop's run_code tool (src/agent/code-tools.ts) in an agent run of `sbx serve`: the model
 * (a local wire-format fake of chat completions) sets a variable in one call and reads it in the
 * next; the session's kernel is the one POST /v1/sessions/{id}/code reaches.
 */
describe('agent runs: the run_code tool', () => {
  const scope = uniqueName('agentcode')
  let model: OpenAIFakeServer
  let srv: SbxServer

  beforeAll(async () => {
    model = await startOpenAIServer()
    srv = await startSbxServer('serve', {
      config: {
        queue: { prefix: scope },
        models: {
          default: {
            kind: 'openai-compatible',
            model: 'gpt-fake',
            baseURL: model.baseURL,
            apiKeyEnv: 'E2E_CODE_MODEL_KEY',
          },
        },
      },
      env: { E2E_CODE_MODEL_KEY: OPENAI_TEST_KEY },
    })
  }, 180_000)

  afterAll(async () => {
    await srv?.stop()
    await model?.close()
    await removeScope(scope)
  }, 60_000)

  test('state persists across the model’s run_code calls and is shared with the HTTP API', async () => {
    const sid = uniqueName('s')
    expect((await srv.post('/v1/sessions', { id: sid, provider: 'docker', profile: 'dev' })).status).toBe(201)
    const call = (id: string, args: unknown) => ({ id, name: 'run_code', arguments: JSON.stringify(args) })
    model.reply(
      chatCompletion({ toolCalls: [call('c1', { code: 'total = sum(range(10))' })] }),
      chatCompletion({ toolCalls: [call('c2', { code: 'print("t"); total * 2' })] }),
      chatCompletion({ content: 'done' }),
    )
    const created = await srv.post('/v1/agent-runs', { input: 'compute', sessionId: sid })
    expect(created.status).toBe(202)
    const { id } = (await created.json()) as { id: string }
    await (await srv.fetch(`/v1/agent-runs/${id}/events`)).text()
    const run = (await (await srv.fetch(`/v1/agent-runs/${id}`)).json()) as { state: string; output: string }
    expect(run, JSON.stringify(run)).toMatchObject({ state: 'completed', output: 'done' })
    const offered = (model.requests[0]?.body as { tools: { function: { name: string } }[] }).tools.map(
      (t) => t.function.name,
    )
    expect(offered).toContain('run_code')
    const toolMessages = (
      model.requests[2]?.body as { messages: { role: string; content: string }[] }
    ).messages
      .filter((m) => m.role === 'tool')
      .map((m) => m.content)
    expect(toolMessages.at(-1)).toContain('"text":"90"')
    expect(toolMessages.at(-1)).toContain('"stdout":"t\\n"')

    const http = await srv.post(`/v1/sessions/${sid}/code`, { code: 'total' })
    expect(((await http.json()) as { text: string }).text).toBe('45')
  }, 120_000)
})
