import { join } from 'node:path'
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { createAgent } from '../../src/agent/agent.js'
import { defineTool, shellTool } from '../../src/agent/define-tool.js'
import { scriptedModel, scriptedToolCall } from '../../src/agent/scripted-model.js'
import { loadConfig } from '../../src/config/load.js'
import type { ConfigInput } from '../../src/config/schema.js'
import { createRuntime } from '../../src/runtime/create-runtime.js'
import type { Runtime } from '../../src/runtime/create-runtime.js'
import { z } from 'zod'
import { PIPELINE_PROFILE } from './fixtures/pipeline-policy.js'
import { OPENAI_TEST_KEY, chatCompletion, startOpenAIServer } from '../fakes/model-servers/openai-server.js'
import type { OpenAIFakeServer } from '../fakes/model-servers/openai-server.js'
import { configDir, removeScopeContainers, startSbxServer, uniqueName } from '../support/sbx-cli.js'
import type { SbxServer } from '../support/sbx-cli.js'

/*
 * One table of tool calls through the three surfaces that turn a call into model-facing text: the
 * agent loop (`createAgent` with a scripted model, composed in-process from the same config file as
 * the server; and an agent run, `POST /v1/agent-runs`, of the server, whose model is a local
 * OpenAI wire-format fake that records the tool message it was sent), `POST /v1/tool-calls` of a real
 * `sbx serve` child, and `/mcp` of that server with the MCP SDK client. Each case's text must be
 * byte-identical on every surface that can express it.
 *
 * What a surface cannot express, and why:
 * - MCP has one shell tool, `bash`, which the server's host policy routes first, and one code tool,
 *   `run_code`, which goes through the pipeline when the policy routes it (`routing.code`); the other tool names
 *   (a before-block by an extension, forceWorkingDirectory, unknown targets) reach only the agent and
 *   /v1/tool-calls, which take any tool name.
 * - A local tool (allow) runs only in an in-process agent: the server (its agent runs included) has
 *   no host tools, so /v1/tool-calls
 *   answers the `allow` verdict with no output (the caller runs the tool) and MCP has no such tool.
 * - "No router" exists only in createAgent: the server always has its queue-backed router.
 */

type Surface = 'agent' | 'agent-run' | 'http' | 'mcp'
interface Case {
  readonly name: string
  readonly tool: string
  readonly args: Record<string, unknown>
  readonly surfaces: readonly Surface[]
  /** The MCP tool the case calls. @default 'bash' */
  readonly mcpTool?: string
  /** What the text must show (on top of being the same everywhere). */
  readonly check: (text: string) => void
}

const ALL: readonly Surface[] = ['agent', 'agent-run', 'http', 'mcp']
const NO_MCP: readonly Surface[] = ['agent', 'agent-run', 'http']
const TIMEOUT_MS = 3_000
const CAP = 2_048

const cases: readonly Case[] = [
  {
    name: 'routed ok',
    tool: 'bash',
    args: { command: 'echo hello; echo warn >&2' },
    surfaces: ALL,
    check: (t) => expect(t).toBe('exit_code: 0\nstdout:\nhello\nstderr:\nwarn'),
  },
  {
    name: 'routed non-zero exit',
    tool: 'bash',
    args: { command: 'echo out; exit 3' },
    surfaces: ALL,
    check: (t) => expect(t).toMatch(/^exit_code: 3\nstdout:\nout\nstderr:\n\(empty\)$/),
  },
  {
    name: 'timeout',
    tool: 'bash',
    args: { command: 'echo started; sleep 30' },
    surfaces: ALL,
    check: (t) => expect(t).toContain(`[timed out after ${TIMEOUT_MS} ms; the process group was killed]`),
  },
  {
    name: 'truncated',
    tool: 'bash',
    args: { command: `head -c ${CAP * 3} /dev/zero | tr '\\0' a` },
    surfaces: ALL,
    check: (t) => expect(t).toContain('[output truncated in the middle'),
  },
  {
    name: 'before-block (host policy: no command)',
    tool: 'bash',
    args: { command: ' ' },
    surfaces: ALL,
    check: (t) => expect(t).toMatch(/^blocked: tool "bash" needs a command/),
  },
  {
    name: 'before-block (extension)',
    tool: 'forbidden',
    args: { command: 'true' },
    surfaces: NO_MCP,
    check: (t) => expect(t).toBe('blocked: the test policy forbids this tool; use bash'),
  },
  {
    name: 'after-block',
    tool: 'bash',
    args: { command: 'echo WITHHOLD-ME' },
    surfaces: ALL,
    check: (t) => expect(t).toBe('blocked: output withheld by the test policy'),
  },
  {
    name: 'after-modify and secret redaction',
    tool: 'bash',
    args: { command: 'echo REWRITE-ME AKIAIOSFODNN7EXAMPLE' },
    surfaces: ALL,
    check: (t) => {
      expect(t).toContain('[rewritten] [REDACTED:aws-access-key-id]')
      expect(t).not.toContain('AKIAIOSFODNN7EXAMPLE')
    },
  },
  {
    name: 'cwd argument',
    tool: 'bash',
    args: { command: 'pwd', cwd: '/tmp' },
    surfaces: ALL,
    check: (t) => expect(t).toContain('stdout:\n/tmp\n'),
  },
  {
    name: 'forceWorkingDirectory cwd',
    tool: 'pinned',
    args: { command: 'pwd' },
    surfaces: NO_MCP,
    check: (t) => expect(t).toContain('stdout:\n/tmp\n'),
  },
  {
    name: 'routed code cell (routing.code)',
    tool: 'run_code',
    args: { code: 'print("hi")\n6 * 7' },
    surfaces: ALL,
    mcpTool: 'run_code',
    check: (t) => expect(t).toBe('stdout:\nhi\nstderr:\n(empty)\nOut: 42'),
  },
  {
    name: 'routed code cell raising',
    tool: 'run_code',
    args: { code: 'def f():\n    return 1 / 0\nf()' },
    surfaces: ALL,
    mcpTool: 'run_code',
    check: (t) =>
      expect(t).toMatch(
        /^stdout:\n\(empty\)\nstderr:\n\(empty\)\nexception: ZeroDivisionError: division by zero\ntraceback:\nTraceback \(most recent call last\):\n[\s\S]*ZeroDivisionError: division by zero$/,
      ),
  },
  {
    name: 'code tool without code (host policy)',
    tool: 'python',
    args: { command: 'ls' },
    surfaces: NO_MCP,
    check: (t) =>
      expect(t).toBe(
        'blocked: tool "python" needs code to run: pass arguments like {"code": "print(1 + 1)"}',
      ),
  },
  {
    name: 'unknown profile',
    tool: 'lost_profile',
    args: { command: 'true' },
    surfaces: NO_MCP,
    check: (t) => expect(t).toMatch(/^error: UNKNOWN_PROFILE: .*no-such-profile/),
  },
  {
    name: 'unknown provider',
    tool: 'lost_provider',
    args: { command: 'true' },
    surfaces: NO_MCP,
    check: (t) => expect(t).toMatch(/^error: UNKNOWN_PROVIDER: .*nowhere/),
  },
]

describe('one tool-call pipeline: createAgent, agent runs, POST /v1/tool-calls and /mcp give the same text', () => {
  const prefix = uniqueName('pipeline')
  const modelKeyEnv = { PIPELINE_OPENAI_KEY: OPENAI_TEST_KEY }
  let model: OpenAIFakeServer | undefined
  const configOf = (baseURL: string): ConfigInput => ({
    queue: { prefix },
    models: {
      default: { kind: 'openai-compatible', model: 'gpt-fake', baseURL, apiKeyEnv: 'PIPELINE_OPENAI_KEY' },
    },
    profiles: {
      [PIPELINE_PROFILE]: { provider: 'docker', defaultTimeoutMs: TIMEOUT_MS, outputCapBytes: CAP },
    },
    routing: {
      shell: { providerId: 'docker', profile: PIPELINE_PROFILE },
      code: { providerId: 'docker', profile: 'dev' },
      secretScanner: 'redact',
    },
    extensions: [join(import.meta.dirname, 'fixtures', 'pipeline-policy.ts')],
  })
  let server: SbxServer | undefined
  let runtime: Runtime | undefined
  let mcp: Client | undefined

  beforeAll(async () => {
    model = await startOpenAIServer()
    const config = configOf(model.baseURL)
    const dir = configDir(config)
    server = await startSbxServer('serve', { config, cwd: dir, env: modelKeyEnv })
    runtime = await createRuntime(loadConfig({ cwd: dir }), {
      agentWorker: false,
      env: { ...process.env, ...modelKeyEnv },
    })
    const client = new Client({ name: 'pipeline-e2e', version: '1.0.0' })
    await client.connect(
      new StreamableHTTPClientTransport(new URL(`${server.url}/mcp`), {
        requestInit: { headers: { authorization: `Bearer ${server.key}` } },
      }),
    )
    mcp = client
  }, 180_000)

  afterAll(async () => {
    await mcp?.close()
    await server?.stop(30_000)
    await runtime?.close()
    await removeScopeContainers(prefix)
    await model?.close()
  }, 120_000)

  let runCalls = 0
  /** The tool message an agent run of the server sent its model for one call. */
  async function viaAgentRun(tool: string, args: Record<string, unknown>): Promise<string> {
    if (!server || !model) throw new Error('no server')
    const base = model.requests.length
    model.reply(
      chatCompletion({
        toolCalls: [{ id: `call_run_${++runCalls}`, name: tool, arguments: JSON.stringify(args) }],
      }),
      chatCompletion({ content: 'done' }),
    )
    const created = await server.post('/v1/agent-runs', { input: 'go', sessionId: 'pipeline-run' })
    expect(created.status).toBe(202)
    const { id } = (await created.json()) as { id: string }
    // The event stream ends with the run.
    await (await server.fetch(`/v1/agent-runs/${id}/events`)).text()
    const second = (await model.requestAt(base + 1)).body as {
      messages: { role: string; content: unknown }[]
    }
    const sent = second.messages.find((m) => m.role === 'tool')?.content
    expect(typeof sent).toBe('string')
    return typeof sent === 'string' ? sent : ''
  }

  /** The text the agent loop fed its model for one call. */
  async function viaAgent(tool: string, args: Record<string, unknown>): Promise<string> {
    if (!runtime) throw new Error('no runtime')
    const model = scriptedModel([{ toolCalls: [scriptedToolCall(tool, args)] }, 'done'])
    const agent = createAgent({
      model,
      tools: [shellTool(), localEcho],
      toolInterceptors: runtime.chains.toolCall,
      router: runtime.router,
      tenant: 'default',
    })
    const result = await agent.run('go', { sessionId: 'pipeline-agent' })
    const sent = model.requests[1]?.messages.find((m) => m.role === 'tool')
    const record = result.toolCalls[0]
    expect(record).toBeDefined()
    // The record and the model's tool message carry the same text.
    expect(sent?.content).toBe(record?.output)
    return record?.output ?? ''
  }

  async function viaHttp(tool: string, args: Record<string, unknown>): Promise<string> {
    if (!server) throw new Error('no server')
    const res = await server.post('/v1/tool-calls', {
      name: tool,
      arguments: args,
      sessionId: 'pipeline-http',
    })
    expect(res.status).toBe(200)
    const body = (await res.json()) as { output?: string }
    expect(typeof body.output).toBe('string')
    return body.output ?? ''
  }

  async function viaMcp(args: Record<string, unknown>, tool = 'bash'): Promise<string> {
    if (!mcp) throw new Error('no mcp client')
    const r = (await mcp.callTool({ name: tool, arguments: args }, undefined, { timeout: 60_000 })) as {
      content: { type: string; text: string }[]
    }
    expect(r.content).toHaveLength(1)
    return r.content[0]?.text ?? ''
  }

  test.each(cases)(
    '$name',
    async (c) => {
      const got: Partial<Record<Surface, string>> = {}
      for (const s of c.surfaces) {
        got[s] =
          s === 'agent'
            ? await viaAgent(c.tool, c.args)
            : s === 'agent-run'
              ? await viaAgentRun(c.tool, c.args)
              : s === 'http'
                ? await viaHttp(c.tool, c.args)
                : await viaMcp(c.args, c.mcpTool)
      }
      // Byte-identical on every surface first (the drift), then what the text must show.
      const first = got[c.surfaces[0] as Surface] ?? ''
      for (const s of c.surfaces) expect({ surface: s, text: got[s] }).toEqual({ surface: s, text: first })
      c.check(first)
    },
    60_000,
  )

  test('allow-local runs the tool in the agent; the server answers the allow verdict without output', async () => {
    const text = await viaAgent('local_echo', { text: 'REWRITE-ME here' })
    // The after-chain applies to local output too.
    expect(text).toBe('echo: [rewritten] here')
    if (!server) throw new Error('no server')
    const res = await server.post('/v1/tool-calls', { name: 'local_echo', arguments: { text: 'x' } })
    const body = (await res.json()) as { decision: { kind: string }; output?: string }
    expect(body.decision.kind).toBe('allow')
    expect(body.output).toBeUndefined()
  }, 60_000)

  test('no router: a routed call is an error result in the agent and never runs locally', async () => {
    if (!runtime) throw new Error('no runtime')
    const agent = createAgent({
      model: scriptedModel([{ toolCalls: [scriptedToolCall('bash', { command: 'echo hi' })] }, 'done']),
      tools: [shellTool()],
      toolInterceptors: runtime.chains.toolCall,
    })
    const result = await agent.run('go')
    expect(result.toolCalls[0]?.output).toMatch(
      /^error: CONFIG_INVALID: tool call "bash" was routed .* no router/,
    )
    expect(result.toolCalls[0]?.via).toBe('none')
  }, 60_000)

  test('a client that disconnects mid-call: the pipeline passes the abort on and its job is cancelled', async () => {
    if (!server) throw new Error('no server')
    const srv = server
    const sessionId = 'pipeline-abort'
    const ac = new AbortController()
    const post = srv
      .post(
        '/v1/tool-calls',
        { name: 'long', arguments: { command: 'echo started; sleep 50' }, sessionId },
        { signal: ac.signal },
      )
      .then(
        () => 'answered',
        () => 'aborted',
      )
    let id: string | undefined
    while (!id) {
      const list = (await (await srv.fetch(`/v1/jobs?sessionId=${sessionId}`)).json()) as {
        jobs: { id: string }[]
      }
      id = list.jobs[0]?.id
    }
    const events = await srv.fetch(`/v1/jobs/${id}/events`)
    const reader = events.body?.pipeThrough(new TextDecoderStream()).getReader()
    if (!reader) throw new Error('no event stream')
    let seen = ''
    while (!seen.includes('started')) {
      const { value, done } = await reader.read()
      if (done) throw new Error(`the event stream ended before the command started: ${seen}`)
      seen += value
    }
    ac.abort()
    expect(await post).toBe('aborted')
    while (!/event: result\n/.test(seen)) {
      const { value, done } = await reader.read()
      if (done) break
      seen += value
    }
    const result = /event: result\ndata: (.*)\n/.exec(seen)?.[1]
    expect(JSON.parse(result ?? '{}')).toMatchObject({ id, state: 'cancelled' })
    const job = (await (await srv.fetch(`/v1/jobs/${id}`)).json()) as { state: string }
    expect(job.state).toBe('cancelled')
  }, 90_000)
})

const localEcho = defineTool({
  name: 'local_echo',
  description: 'Echo text locally',
  parameters: z.object({ text: z.string() }),
  execute: ({ text }) => `echo: ${text}`,
})
