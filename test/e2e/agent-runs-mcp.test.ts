import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { startLiveService } from '../support/live-service.js'
import type { LiveService } from '../support/live-service.js'
import { runCli } from '../../src/cli/run.js'
import type { LiveServer } from '../support/live-service.js'
import { OPENAI_TEST_KEY, chatCompletion, startOpenAIServer } from '../fakes/model-servers/openai-server.js'
import type { OpenAIFakeServer } from '../fakes/model-servers/openai-server.js'

const ACME = 'acme-key-0123456789abcdef'
const GLOBEX = 'globex-key-0123456789abcdef'

let model: OpenAIFakeServer
let server: LiveServer

let live: LiveService

beforeAll(async () => {
  model = await startOpenAIServer()
  live = await startLiveService({
    prefix: `e2eagent${process.pid}`,
    config: {
      models: {
        default: {
          kind: 'openai-compatible',
          model: 'gpt-fake',
          baseURL: model.baseURL,
          apiKeyEnv: 'E2E_OPENAI_KEY',
        },
      },
    },
    env: { E2E_OPENAI_KEY: OPENAI_TEST_KEY },
    keys: [
      { key: ACME, tenant: 'acme' },
      { key: GLOBEX, tenant: 'globex' },
    ],
  })
  server = live.server
}, 120_000)

afterAll(async () => {
  await live?.close()
  await model?.close()
}, 60_000)

function api(path: string, key: string, init: RequestInit = {}): Promise<Response> {
  const headers = new Headers(init.headers)
  headers.set('authorization', `Bearer ${key}`)
  if (init.body) headers.set('content-type', 'application/json')
  return fetch(`${server.url}${path}`, { ...init, headers })
}

describe('agent runs over HTTP (real openai SDK against a local wire-format server, real Docker)', () => {
  test('a queued run routes its shell into the sandbox, streams lifecycle events and finishes', async () => {
    model.reply(
      chatCompletion({
        toolCalls: [
          {
            id: 'call_1',
            name: 'bash',
            arguments: JSON.stringify({ command: 'echo from-agent > f.txt && cat f.txt' }),
          },
        ],
        usage: { prompt_tokens: 50, completion_tokens: 10 },
      }),
      chatCompletion({
        content: 'the file says from-agent',
        usage: { prompt_tokens: 80, completion_tokens: 6 },
      }),
    )
    const created = await api('/v1/agent-runs', ACME, {
      method: 'POST',
      body: JSON.stringify({ input: 'write a file', sessionId: 'agent-s1' }),
    })
    expect(created.status).toBe(202)
    const { id } = (await created.json()) as { id: string }
    expect((await api(`/v1/agent-runs/${id}`, GLOBEX)).status).toBe(404)
    const sse = await (await api(`/v1/agent-runs/${id}/events`, ACME)).text()
    expect(sse).toContain('BEFORE_TOOL_CALL')
    expect(sse).toContain('AFTER_TOOL_CALL')
    expect(sse).toContain('event: end')
    const run = (await (await api(`/v1/agent-runs/${id}`, ACME)).json()) as {
      state: string
      output: string
      finishReason: string
      usage: { totalTokens: number }
      toolCalls: { name: string; routed: boolean }[]
    }
    expect(run).toMatchObject({
      state: 'completed',
      output: 'the file says from-agent',
      finishReason: 'natural_stop',
    })
    expect(run.usage.totalTokens).toBe(146)
    expect(run.toolCalls).toEqual([expect.objectContaining({ name: 'bash', routed: true })])
    // the tool result the model saw on its second call came from the sandbox
    const second = model.requests[1]?.body as { messages: { role: string; content: string }[] }
    expect(second.messages.find((m) => m.role === 'tool')?.content).toContain('from-agent')
    // and the file is in the session's sandbox
    const file = await api('/v1/sessions/agent-s1/files?path=f.txt', ACME)
    expect(await file.text()).toBe('from-agent\n')
  })

  test('a model that fails ends the run with finishReason error and the provider message', async () => {
    model.reply({
      kind: 'json',
      status: 400,
      body: { error: { message: 'context too long', type: 'invalid_request_error' } },
    })
    const { id } = (await (
      await api('/v1/agent-runs', ACME, { method: 'POST', body: JSON.stringify({ input: 'x' }) })
    ).json()) as { id: string }
    await (await api(`/v1/agent-runs/${id}/events`, ACME)).text()
    const run = (await (await api(`/v1/agent-runs/${id}`, ACME)).json()) as {
      state: string
      finishReason: string
      error: { message: string }
    }
    expect(run).toMatchObject({ state: 'failed', finishReason: 'error' })
    expect(run.error.message).toContain('context too long')
  })

  test('unknown model is a 400 naming the configured ones', async () => {
    const r = await api('/v1/agent-runs', ACME, {
      method: 'POST',
      body: JSON.stringify({ input: 'x', model: 'gpt-9' }),
    })
    expect(r.status).toBe(400)
    expect(((await r.json()) as { error: { message: string } }).error.message).toContain('default')
  })
})

describe('MCP endpoint with the SDK client', () => {
  test('bash runs in the session sandbox; files persist; another tenant cannot use the session', async () => {
    const transport = new StreamableHTTPClientTransport(new URL(`${server.url}/mcp`), {
      requestInit: { headers: { authorization: `Bearer ${ACME}` } },
    })
    const client = new Client({ name: 'e2e', version: '1.0.0' })
    await client.connect(transport)
    const tools = await client.listTools()
    expect(tools.tools.map((t) => t.name).sort()).toEqual([
      'bash',
      'edit_file',
      'kill_process',
      'list_processes',
      'list_sessions',
      'read_file',
      'read_process_output',
      'run_code',
      'start_process',
      'write_file',
      'write_process_stdin',
    ])
    const w = await client.callTool({
      name: 'write_file',
      arguments: { path: 'hello.txt', content: 'hi mcp' },
    })
    expect(w.isError).toBeFalsy()
    const r = (await client.callTool({
      name: 'bash',
      arguments: { command: 'cat hello.txt; echo; id -u' },
    })) as { content: { text: string }[]; isError?: boolean }
    expect(r.isError).toBeFalsy()
    expect(r.content[0]?.text).toContain('hi mcp')
    expect(r.content[0]?.text).toContain('1000')
    const read = (await client.callTool({ name: 'read_file', arguments: { path: 'hello.txt' } })) as {
      content: { text: string }[]
    }
    expect(read.content[0]?.text).toBe('hi mcp')
    const list = (await client.callTool({ name: 'list_sessions', arguments: {} })) as {
      content: { text: string }[]
    }
    expect(list.content[0]?.text).toMatch(/mcp-/)

    // The same MCP session id presented with another tenant's key is unknown.
    const sid = transport.sessionId
    expect(sid).toBeTruthy()
    const stolen = await fetch(`${server.url}/mcp`, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${GLOBEX}`,
        'mcp-session-id': sid ?? '',
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
      },
      body: JSON.stringify({ jsonrpc: '2.0', id: 9, method: 'tools/list' }),
    })
    expect(stolen.status).toBe(404)
    await client.close()
  })

  test('no key: 401', async () => {
    const r = await fetch(`${server.url}/mcp`, {
      method: 'POST',
      body: '{}',
      headers: { 'content-type': 'application/json' },
    })
    expect(r.status).toBe(401)
  })
})

describe('CLI client commands against the server', () => {
  test('sbx agent run streams events and prints the output; sbx sessions ls/rm', async () => {
    model.reply(
      chatCompletion({ content: 'hello from the model', usage: { prompt_tokens: 5, completion_tokens: 3 } }),
    )
    const out: string[] = []
    const err: string[] = []
    const io = { tty: false, out: (l: string) => void out.push(l), err: (l: string) => void err.push(l) }
    const code = await runCli(
      ['agent', 'run', 'say hello', '--session', 'cli-s1', '--url', server.url, '--key', ACME],
      io,
    )
    expect(code).toBe(0)
    expect(out).toContain('hello from the model')
    expect(err.join('\n')).toMatch(/BEFORE_MODEL_REQUEST/)
    expect(err.join('\n')).toMatch(/finished: completed \(natural_stop\)/)
    out.length = 0
    expect(await runCli(['sessions', 'ls', '--url', server.url, '--key', ACME, '--json'], io)).toBe(0)
    expect((JSON.parse(out[0] ?? '[]') as { id: string }[]).map((s) => s.id)).toContain('cli-s1')
    expect(await runCli(['sessions', 'rm', 'cli-s1', '--url', server.url, '--key', ACME], io)).toBe(0)
    err.length = 0
    expect(await runCli(['sessions', 'rm', 'cli-s1', '--url', server.url, '--key', ACME], io)).toBe(1)
    expect(err.join('\n')).toMatch(/NOT_FOUND/)
  })
})
