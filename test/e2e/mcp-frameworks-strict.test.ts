/*
 * Strict-mode acceptance by real agent frameworks (issue 12 §6): the Vercel AI SDK's MCP client
 * (`@ai-sdk/mcp` + `ai` + `@ai-sdk/openai`) and the OpenAI Agents JS SDK (`@openai/agents`) connect to
 * `/mcp` of a real `node bin/sbx.js serve`, list its tools, turn them into strict function tools and
 * run an agent loop against a local fake OpenAI chat-completions server (no network model). The test
 * checks the tool definitions the framework really sends (every tool `strict: true`, and each schema
 * valid under OpenAI's strict rules) and that the calls a strict model makes (nulls for the optional
 * arguments, base64 file content) run in the session's sandbox, with shell state kept between calls.
 */
import { createMCPClient } from '@ai-sdk/mcp'
import type { MCPClient } from '@ai-sdk/mcp'
import { createOpenAI } from '@ai-sdk/openai'
import { Agent, MCPServerStreamableHttp, OpenAIProvider, Runner, setTracingDisabled } from '@openai/agents'
import { generateText, stepCountIs } from 'ai'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { chatCompletion, OPENAI_TEST_KEY, startOpenAIServer } from '../fakes/model-servers/openai-server.js'
import type { OpenAIFakeServer } from '../fakes/model-servers/openai-server.js'
import type { RecordedRequest } from '../fakes/model-servers/scripted-server.js'
import { admitsNull, strictSchemaProblems } from '../support/openai-strict-schema.js'
import { removeScopeContainers, startSbxServer, uniqueName } from '../support/sbx-cli.js'
import type { SbxServer } from '../support/sbx-cli.js'

const TOOLS = [
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
]
/** Arguments a strict model must send as null to leave them out. */
const OPTIONAL: Record<string, string[]> = {
  bash: ['cwd', 'timeoutMs'],
  read_file: ['encoding', 'startLine', 'endLine'],
  write_file: ['encoding'],
  start_process: ['cwd'],
  read_process_output: ['stdoutOffset', 'stderrOffset', 'waitMs'],
  write_process_stdin: ['close'],
  kill_process: ['signal'],
  run_code: ['language', 'timeoutMs'],
}

interface WireTool {
  type: string
  function: { name: string; parameters: unknown; strict?: boolean }
}

const prefix = uniqueName('mcpfw')
let srv: SbxServer
let model: OpenAIFakeServer

beforeAll(async () => {
  setTracingDisabled(true)
  srv = await startSbxServer('serve', { config: { queue: { prefix } } })
  model = await startOpenAIServer()
}, 120_000)

afterAll(async () => {
  await model?.close()
  await srv?.stop()
  await removeScopeContainers(prefix)
}, 60_000)

/** The scripted model's two tool-calling turns, then its answer: what a strict model would send. */
function scriptModel(tag: string): void {
  model.reply(
    chatCompletion({
      toolCalls: [
        {
          id: `${tag}-1`,
          name: 'bash',
          arguments: JSON.stringify({
            command: `mkdir -p /tmp/${tag} && cd /tmp/${tag} && export MARK=${tag} && echo "at:$PWD:$MARK"`,
            cwd: null,
            timeoutMs: null,
          }),
        },
        {
          id: `${tag}-2`,
          name: 'write_file',
          arguments: JSON.stringify({
            path: `${tag}.bin`,
            content: Buffer.from([0, 255, 1, 254, 10]).toString('base64'),
            encoding: 'base64',
          }),
        },
      ],
    }),
    chatCompletion({
      toolCalls: [
        {
          id: `${tag}-3`,
          name: 'bash',
          arguments: JSON.stringify({
            command: `echo "again:$PWD:$MARK:$(od -An -tu1 /workspace/${tag}.bin | tr -s ' ' ',')"`,
            cwd: null,
            timeoutMs: null,
          }),
        },
      ],
    }),
    chatCompletion({ content: `done-${tag}` }),
  )
}

/** Checks the tools of one chat-completions request: all of this server's, all strict and valid. */
function expectStrictTools(req: RecordedRequest): void {
  const tools = (req.body as { tools: WireTool[] }).tools
  expect(tools.map((t) => t.function.name).sort()).toEqual(TOOLS)
  for (const { function: fn } of tools) {
    expect(fn.strict, fn.name).toBe(true)
    expect(strictSchemaProblems(fn.parameters), fn.name).toEqual([])
    const props = (fn.parameters as { properties: Record<string, unknown> }).properties
    for (const name of OPTIONAL[fn.name] ?? [])
      expect(admitsNull(props[name]), `${fn.name}.${name}`).toBe(true)
  }
}

/** What the framework sent back to the model as tool results, as one string. */
const toolResultsOf = (req: RecordedRequest): string =>
  JSON.stringify((req.body as { messages: { role: string }[] }).messages.filter((m) => m.role === 'tool'))

describe('agent frameworks accept the MCP tools in strict mode and call them', () => {
  test('Vercel AI SDK: @ai-sdk/mcp tools marked strict, generateText through @ai-sdk/openai', async () => {
    const client: MCPClient = await createMCPClient({
      transport: { type: 'http', url: `${srv.url}/mcp`, headers: { authorization: `Bearer ${srv.key}` } },
    })
    try {
      expect(client.instructions).toContain('Persistent shell state')
      const tools = await client.tools()
      // The AI SDK's strict mode is per tool: providers that have one (OpenAI) send `strict: true`.
      for (const t of Object.values(tools)) t.strict = true
      const first = model.requests.length
      scriptModel('aisdk')
      const openai = createOpenAI({ baseURL: model.baseURL, apiKey: OPENAI_TEST_KEY })
      const result = await generateText({
        model: openai.chat('gpt-fake'),
        tools,
        prompt: 'Work in the sandbox.',
        stopWhen: stepCountIs(5),
      })
      expect(result.text).toBe('done-aisdk')
      const [r0, r1, r2] = [first, first + 1, first + 2].map((i) => model.requests[i]!)
      expectStrictTools(r0!)
      expect(toolResultsOf(r1!)).toContain('at:/tmp/aisdk:aisdk')
      expect(toolResultsOf(r1!)).toContain('wrote 5 bytes to aisdk.bin')
      expect(toolResultsOf(r1!)).not.toContain('"isError":true')
      // The persistent shell kept cd and the export; the bytes arrived unchanged.
      expect(toolResultsOf(r2!)).toContain('again:/tmp/aisdk:aisdk:,0,255,1,254,10')
    } finally {
      await client.close()
    }
  }, 120_000)

  test('OpenAI Agents JS: MCPServerStreamableHttp with convertSchemasToStrict, run through chat completions', async () => {
    const server = new MCPServerStreamableHttp({
      url: `${srv.url}/mcp`,
      name: 'sandbox',
      requestInit: { headers: { authorization: `Bearer ${srv.key}` } },
    })
    await server.connect()
    try {
      const agent = new Agent({
        name: 'sandboxed',
        instructions: 'Work in the sandbox.',
        model: 'gpt-fake',
        mcpServers: [server],
        mcpConfig: { convertSchemasToStrict: true },
      })
      const runner = new Runner({
        modelProvider: new OpenAIProvider({
          apiKey: OPENAI_TEST_KEY,
          baseURL: model.baseURL,
          useResponses: false,
        }),
        tracingDisabled: true,
      })
      const first = model.requests.length
      scriptModel('agents')
      const result = await runner.run(agent, 'Work in the sandbox.', { maxTurns: 5 })
      expect(result.finalOutput).toBe('done-agents')
      const [r0, r1, r2] = [first, first + 1, first + 2].map((i) => model.requests[i]!)
      expectStrictTools(r0!)
      expect(toolResultsOf(r1!)).toContain('at:/tmp/agents:agents')
      expect(toolResultsOf(r1!)).toContain('wrote 5 bytes to agents.bin')
      expect(toolResultsOf(r2!)).toContain('again:/tmp/agents:agents:,0,255,1,254,10')
    } finally {
      await server.close()
    }
  }, 120_000)
})
