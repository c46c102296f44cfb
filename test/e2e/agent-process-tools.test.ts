import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { OPENAI_TEST_KEY, chatCompletion, startOpenAIServer } from '../fakes/model-servers/openai-server.js'
import type { OpenAIFakeServer } from '../fakes/model-servers/openai-server.js'
import { removeScope, startSbxServer, uniqueName } from '../support/sbx-cli.js'
import type { SbxServer } from '../support/sbx-cli.js'

interface Proc {
  id: string
  command: string
  state: string
  signal: string | null
}

/*
 * The agent loop's process tools (src/agent/process-tools.ts) in an agent run of `sbx serve`: the
 * model (a local wire-format fake of the chat completions API) starts a process, writes to the stdin
 * of one started over HTTP, reads its output, lists and kills; the HTTP API sees the same processes.
 */
describe('agent runs: the process tools next to the shell tool', () => {
  const scope = uniqueName('agentprocs')
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
            apiKeyEnv: 'E2E_PROCS_MODEL_KEY',
          },
        },
      },
      env: { E2E_PROCS_MODEL_KEY: OPENAI_TEST_KEY },
    })
  }, 180_000)

  afterAll(async () => {
    await srv?.stop()
    await model?.close()
    await removeScope(scope)
  }, 60_000)

  test('start_process, write_process_stdin, read_process_output, list_processes, kill_process', async () => {
    const sid = uniqueName('s')
    expect((await srv.post('/v1/sessions', { id: sid, provider: 'docker', profile: 'default' })).status).toBe(
      201,
    )
    const started = await srv.post(`/v1/sessions/${sid}/processes`, {
      command: 'while read -r l; do echo "got $l"; done',
    })
    expect(started.status).toBe(201)
    const loop = (await started.json()) as Proc
    const call = (id: string, name: string, args: unknown) => ({ id, name, arguments: JSON.stringify(args) })
    model.reply(
      chatCompletion({
        toolCalls: [
          call('c1', 'start_process', { command: 'echo started-by-agent; sleep 600' }),
          call('c2', 'write_process_stdin', { id: loop.id, data: 'hello\n' }),
        ],
      }),
      chatCompletion({
        toolCalls: [
          call('c3', 'read_process_output', { id: loop.id, waitMs: 10_000 }),
          call('c4', 'list_processes', {}),
        ],
      }),
      chatCompletion({ toolCalls: [call('c5', 'kill_process', { id: loop.id })] }),
      chatCompletion({ content: 'done' }),
    )
    const created = await srv.post('/v1/agent-runs', {
      input: 'run things in the background',
      sessionId: sid,
    })
    expect(created.status).toBe(202)
    const { id } = (await created.json()) as { id: string }
    await (await srv.fetch(`/v1/agent-runs/${id}/events`)).text()
    const run = (await (await srv.fetch(`/v1/agent-runs/${id}`)).json()) as {
      state: string
      output: string
      toolCalls: { name: string }[]
    }
    expect(run, JSON.stringify(run)).toMatchObject({ state: 'completed', output: 'done' })
    expect(run.toolCalls.map((t) => t.name)).toEqual([
      'start_process',
      'write_process_stdin',
      'read_process_output',
      'list_processes',
      'kill_process',
    ])
    // What the model was told: the tools are offered, and each answer is the process API's.
    const offered = (model.requests[0]?.body as { tools: { function: { name: string } }[] }).tools.map(
      (t) => t.function.name,
    )
    expect(offered).toEqual(
      expect.arrayContaining([
        'bash',
        'start_process',
        'list_processes',
        'read_process_output',
        'write_process_stdin',
        'kill_process',
      ]),
    )
    const toolMessages = (i: number) =>
      (model.requests[i]?.body as { messages: { role: string; content: string }[] }).messages
        .filter((m) => m.role === 'tool')
        .map((m) => m.content)
    const read = JSON.parse(toolMessages(2).at(-2) ?? '{}') as { stdout: string; nextStdoutOffset: number }
    expect(read.stdout).toBe('got hello\n')
    expect(read.nextStdoutOffset).toBe(10)
    const killed = JSON.parse(toolMessages(3).at(-1) ?? '{}') as Proc
    expect(killed).toMatchObject({ id: loop.id, state: 'exited', signal: 'SIGKILL' })

    const listed = (await (await srv.fetch(`/v1/sessions/${sid}/processes`)).json()) as { processes: Proc[] }
    expect(listed.processes.map((p) => [p.command, p.state])).toEqual([
      ['while read -r l; do echo "got $l"; done', 'exited'],
      ['echo started-by-agent; sleep 600', 'running'],
    ])
  }, 120_000)
})
