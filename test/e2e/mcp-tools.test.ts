/*
 * The MCP server as agents use it (issue 12 §6): a real `node bin/sbx.js serve` child process, the
 * official SDK client, the real Docker engine. Cancel kills the command; every failed outcome is
 * `isError`; progress streams live output; `timeoutMs` works and unknown arguments are refused;
 * schemas are strict-mode ready; instructions explain the session; read_file ranges and edit_file.
 */
import { execFile } from 'node:child_process'
import { request } from 'node:http'
import { promisify } from 'node:util'
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { removeScopeContainers, startSbxServer, uniqueName } from '../support/sbx-cli.js'
import type { SbxServer } from '../support/sbx-cli.js'

const run = promisify(execFile)
type ToolResult = { content: { type: string; text: string }[]; isError?: boolean }

const prefix = uniqueName('mcptools')
let srv: SbxServer
const clients: Client[] = []

beforeAll(async () => {
  srv = await startSbxServer('serve', { config: { queue: { prefix } } })
}, 120_000)

afterAll(async () => {
  for (const c of clients) await c.close().catch(() => undefined)
  await srv?.stop()
  await removeScopeContainers(prefix)
}, 60_000)

async function connect(): Promise<Client> {
  const transport = new StreamableHTTPClientTransport(new URL(`${srv.url}/mcp`), {
    requestInit: { headers: { authorization: `Bearer ${srv.key}` } },
  })
  const client = new Client({ name: 'e2e-mcp-tools', version: '1.0.0' })
  await client.connect(transport)
  clients.push(client)
  return client
}

async function call(
  client: Client,
  name: string,
  args: Record<string, unknown>,
  opts: Parameters<Client['callTool']>[2] = {},
): Promise<ToolResult> {
  return (await client.callTool({ name, arguments: args }, undefined, {
    timeout: 90_000,
    ...opts,
  })) as ToolResult
}
const textOf = (r: ToolResult): string => r.content.map((c) => c.text).join('')

/**
 * Waits inside the sandbox (one `bash` call, polling `ps` there) until a process whose command line
 * holds `pattern` runs (`present`) or is gone; the call prints `yes` or, after `ms`, `no`.
 */
async function waitForProcess(
  client: Client,
  pattern: string,
  present: boolean,
  ms: number,
): Promise<string> {
  const rounds = Math.ceil(ms / 100)
  // `[x]yz` keeps the grep from matching its own command line.
  const grep = `ps -eo args | grep -q '[${pattern[0]}]${pattern.slice(1)}'`
  const test = present ? grep : `! ${grep}`
  const command = `for i in $(seq ${rounds}); do if ${test}; then echo yes; exit 0; fi; sleep 0.1; done; echo no`
  // Through /v1/exec (a fresh shell) in the MCP session's sandbox: the session's persistent shell is
  // busy with the call being watched, and its calls are queued, never interleaved.
  const sid = (client.transport as StreamableHTTPClientTransport | undefined)?.sessionId ?? ''
  const res = await srv.post('/v1/exec', {
    provider: 'docker',
    profile: 'default',
    sessionId: `mcp-${sid}`,
    command,
    timeoutMs: ms + 10_000,
  })
  const job = (await res.json()) as { result?: { stdout: string } }
  return job.result?.stdout ?? JSON.stringify(job)
}

describe('MCP tools through sbx serve', () => {
  test('notifications/cancelled kills the command in the sandbox', async () => {
    const client = await connect()
    const ac = new AbortController()
    const pending = call(
      client,
      'bash',
      { command: 'sleep 37; echo ran-to-end > /workspace/after-cancel' },
      { signal: ac.signal },
    ).then(
      () => 'resolved',
      (err: unknown) => `rejected: ${String(err)}`,
    )
    // The command is running (a second call of the same session sees it) …
    expect(await waitForProcess(client, 'sleep 37', true, 30_000)).toContain('yes')
    // … then the SDK client cancels: it sends notifications/cancelled and stops waiting.
    ac.abort('user cancelled')
    expect(await pending).toMatch(/^rejected/)
    // Gone within 10 s (before the fix it ran its 37 s to the end).
    expect(await waitForProcess(client, 'sleep 37', false, 10_000)).toContain('yes')
    const marker = await call(client, 'bash', { command: 'cat /workspace/after-cancel' })
    expect(marker.isError).toBe(true)
    expect(textOf(marker)).toContain('No such file')
  }, 120_000)

  test('a client that drops the connection mid-call gets its command killed too', async () => {
    const client = await connect()
    const sid = (client.transport as StreamableHTTPClientTransport | undefined)?.sessionId ?? ''
    const url = new URL(`${srv.url}/mcp`)
    // A raw tools/call on the session, whose SSE answer the "client" abandons without a cancel.
    const req = request({
      host: url.hostname,
      port: url.port,
      path: '/mcp',
      method: 'POST',
      headers: {
        authorization: `Bearer ${srv.key}`,
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
        'mcp-session-id': sid,
      },
    })
    const answered = new Promise<number>((resolve, reject) => {
      req.on('response', (res) => resolve(res.statusCode ?? 0))
      req.on('error', reject)
    })
    req.end(
      JSON.stringify({
        jsonrpc: '2.0',
        id: 77,
        method: 'tools/call',
        params: { name: 'bash', arguments: { command: 'sleep 39; echo ran > /workspace/after-drop' } },
      }),
    )
    expect(await answered).toBe(200)
    expect(await waitForProcess(client, 'sleep 39', true, 30_000)).toContain('yes')
    req.destroy()
    expect(await waitForProcess(client, 'sleep 39', false, 10_000)).toContain('yes')
    const marker = await call(client, 'bash', { command: 'cat /workspace/after-drop' })
    expect(marker.isError).toBe(true)
  }, 120_000)

  test('a sandbox lost mid-call is an isError result (SANDBOX_LOST)', async () => {
    const client = await connect()
    await call(client, 'bash', { command: 'true' })
    const sid = (client.transport as StreamableHTTPClientTransport | undefined)?.sessionId
    const sessions = JSON.parse(textOf(await call(client, 'list_sessions', {}))) as {
      id: string
      sandboxId?: string
    }[]
    const id = sessions.find((s) => s.id === `mcp-${sid}`)?.sandboxId
    expect(id).toBeTruthy()
    const pending = call(client, 'bash', { command: 'sleep 38' })
    expect(await waitForProcess(client, 'sleep 38', true, 30_000)).toContain('yes')
    await run('docker', ['kill', id ?? ''])
    const r = await pending
    expect(textOf(r)).toContain('SANDBOX_LOST')
    expect(r.isError).toBe(true)
  }, 120_000)

  test('progress notifications carry the live output while the command runs', async () => {
    const client = await connect()
    const messages: string[] = []
    let released: Promise<ToolResult> | undefined
    // The command waits for a file the test writes only after it saw "ready" as progress: without
    // live progress it would run into its timeout.
    const r = await call(
      client,
      'bash',
      {
        command: 'echo ready; while [ ! -e /workspace/go ]; do sleep 0.05; done; echo finished',
        timeoutMs: 30_000,
      },
      {
        onprogress: (p) => {
          messages.push(p.message ?? '')
          if (!released && messages.join('').includes('ready'))
            released = call(client, 'write_file', { path: 'go', content: '' })
        },
      },
    )
    expect(released).toBeDefined()
    expect((await released)?.isError).toBeFalsy()
    expect(r.isError).toBeFalsy()
    expect(textOf(r)).toContain('finished')
    expect(messages.join('')).toContain('finished')
  }, 120_000)

  test('a silent command sends heartbeats, so a client that resets its timeout on progress keeps waiting', async () => {
    const client = await connect()
    const beats: { progress: number; message?: string }[] = []
    // The command outlasts the client's 12 s timeout; a heartbeat every 10 s resets it.
    const r = await call(
      client,
      'bash',
      { command: 'sleep 14; echo survived' },
      {
        timeout: 12_000,
        resetTimeoutOnProgress: true,
        onprogress: (p) =>
          void beats.push({ progress: p.progress, ...(p.message ? { message: p.message } : {}) }),
      },
    )
    expect(r.isError).toBeFalsy()
    expect(textOf(r)).toContain('survived')
    expect(beats.filter((b) => b.message === undefined).length).toBeGreaterThanOrEqual(1)
    for (let i = 1; i < beats.length; i++) expect(beats[i]!.progress).toBeGreaterThan(beats[i - 1]!.progress)
  }, 120_000)

  test('timeoutMs kills a long command; over the profile max and unknown arguments are clear errors', async () => {
    const client = await connect()
    const t0 = Date.now()
    const timedOut = await call(client, 'bash', { command: 'sleep 20; echo late', timeoutMs: 700 })
    expect(Date.now() - t0).toBeLessThan(10_000)
    expect(timedOut.isError).toBe(true)
    expect(textOf(timedOut)).toMatch(/timed out after 700 ms/)
    expect(textOf(timedOut)).not.toContain('late')

    const tooLong = await call(client, 'bash', { command: 'echo x', timeoutMs: 600_001 })
    expect(tooLong.isError).toBe(true)
    expect(textOf(tooLong)).toContain('at most 600000')

    const unknown = await call(client, 'bash', { command: 'sleep 5; echo ran', timeout: 1 })
    expect(unknown.isError).toBe(true)
    expect(textOf(unknown)).toContain('unknown argument "timeout"')
    expect(textOf(unknown)).toContain('bash takes command, cwd, timeoutMs')
    const typo = await call(client, 'read_file', { file: 'x' })
    expect(typo.isError).toBe(true)
    expect(textOf(typo)).toContain('unknown argument "file"')
  }, 120_000)

  test('tool schemas are strict-mode ready; null means absent; instructions explain the session', async () => {
    const client = await connect()
    const { tools } = await client.listTools()
    expect(tools.map((t) => t.name).sort()).toEqual([
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
    for (const tool of tools) {
      const schema = tool.inputSchema as {
        properties?: Record<string, unknown>
        required?: string[]
      } & Record<string, unknown>
      expect(schema['additionalProperties'], tool.name).toBe(false)
      expect([...(schema.required ?? [])].sort(), tool.name).toEqual(
        Object.keys(schema.properties ?? {}).sort(),
      )
      expect(JSON.stringify(schema), tool.name).not.toMatch(/minLength/)
    }
    const pwd = await call(client, 'bash', { command: 'pwd', cwd: null, timeoutMs: null })
    expect(pwd.isError).toBeFalsy()
    expect(textOf(pwd)).toContain('/workspace')
    const tmp = await call(client, 'bash', { command: 'pwd', cwd: '/tmp', timeoutMs: null })
    expect(textOf(tmp)).toContain('/tmp')
    const relative = await call(client, 'bash', { command: 'pwd', cwd: 'tmp' })
    expect(relative.isError).toBe(true)
    expect(textOf(relative)).toContain('absolute path')
    const list = await call(client, 'list_sessions', {})
    expect(list.isError).toBeFalsy()
    const range = await call(client, 'read_file', { path: 'nope', startLine: null, endLine: null })
    expect(range.isError).toBe(true)

    const instructions = client.getInstructions() ?? ''
    expect(instructions).toContain('/workspace')
    expect(instructions).toMatch(/persist/)
    expect(instructions).toMatch(/shell state/)
    expect(instructions).toMatch(/10 min without a request/)
  }, 120_000)

  test('read_file returns line ranges; edit_file replaces exactly one match and refuses zero or several', async () => {
    const client = await connect()
    await call(client, 'write_file', { path: 'src/a.txt', content: 'one\ntwo\nthree\ntwo\nfive\n' })
    const mid = await call(client, 'read_file', { path: 'src/a.txt', startLine: 2, endLine: 3 })
    expect(textOf(mid)).toBe('two\nthree')
    const tail = await call(client, 'read_file', { path: 'src/a.txt', startLine: 5 })
    expect(textOf(tail)).toBe('five\n')
    const past = await call(client, 'read_file', { path: 'src/a.txt', startLine: 9 })
    expect(past.isError).toBe(true)

    const several = await call(client, 'edit_file', { path: 'src/a.txt', oldText: 'two', newText: '2' })
    expect(several.isError).toBe(true)
    expect(textOf(several)).toContain('occurs 2 times')
    const none = await call(client, 'edit_file', { path: 'src/a.txt', oldText: 'six', newText: '6' })
    expect(none.isError).toBe(true)
    expect(textOf(none)).toContain('does not occur')
    const once = await call(client, 'edit_file', {
      path: 'src/a.txt',
      oldText: 'three\ntwo',
      newText: '3\n2',
    })
    expect(once.isError).toBeFalsy()
    expect(textOf(once)).toContain('line 3')
    const cat = await call(client, 'bash', { command: 'cat src/a.txt' })
    expect(textOf(cat)).toContain('one\ntwo\n3\n2\nfive')
  }, 120_000)
})
