/*
 * Background processes through the MCP tools (issue 12 §3): a real `node bin/sbx.js serve`, the
 * official SDK client, the real Docker engine. start_process, list_processes, read_process_output
 * from offsets (a long poll), write_process_stdin to a read loop, kill_process; failures are isError.
 */
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { removeScope, startSbxServer, uniqueName } from '../support/sbx-cli.js'
import type { SbxServer } from '../support/sbx-cli.js'

type ToolResult = { content: { type: string; text: string }[]; isError?: boolean }
interface Proc {
  id: string
  state: string
  exitCode: number | null
  signal: string | null
  stdinClosed: boolean
}
interface Read {
  process: Proc
  stdout: string
  stderr: string
  nextStdoutOffset: number
  nextStderrOffset: number
  droppedStdoutBytes: number
}

describe('background processes through the MCP tools of sbx serve', () => {
  const scope = uniqueName('mcpprocs')
  let srv: SbxServer
  let client: Client

  beforeAll(async () => {
    srv = await startSbxServer('serve', {
      config: { queue: { prefix: scope }, quotas: { maxProcessesPerSession: 2 } },
    })
    const transport = new StreamableHTTPClientTransport(new URL(`${srv.url}/mcp`), {
      requestInit: { headers: { authorization: `Bearer ${srv.key}` } },
    })
    client = new Client({ name: 'e2e-mcp-processes', version: '1.0.0' })
    await client.connect(transport)
  }, 180_000)

  afterAll(async () => {
    await client?.close().catch(() => undefined)
    await srv?.stop()
    await removeScope(scope)
  }, 60_000)

  const call = async (name: string, args: Record<string, unknown>): Promise<ToolResult> =>
    (await client.callTool({ name, arguments: args }, undefined, { timeout: 60_000 })) as ToolResult
  const ok = async <T>(name: string, args: Record<string, unknown>): Promise<T> => {
    const r = await call(name, args)
    const t = r.content.map((c) => c.text).join('')
    expect(r.isError, t).toBeFalsy()
    return JSON.parse(t) as T
  }
  /** Reads on from the previous offsets (each read waits for new output) until `done`. */
  const collect = async (id: string, done: (stdout: string, last: Read) => boolean) => {
    let stdout = ''
    let at = { stdoutOffset: 0, stderrOffset: 0 }
    for (const deadline = Date.now() + 30_000; ;) {
      const r = await ok<Read>('read_process_output', { id, ...at, waitMs: 5_000 })
      stdout += r.stdout
      at = { stdoutOffset: r.nextStdoutOffset, stderrOffset: r.nextStderrOffset }
      if (done(stdout, r)) return { stdout, last: r }
      if (Date.now() > deadline) throw new Error(`gave up; got ${JSON.stringify(stdout)}`)
    }
  }

  test('start, list, read from offsets, kill; the output stays readable', async () => {
    const command = `sh -c 'i=0; while :; do echo $i; i=$((i+1)); sleep 0.05; done'`
    const p = await ok<Proc>('start_process', { command, cwd: null })
    expect(p.state).toBe('running')
    const listed = await ok<Proc[]>('list_processes', {})
    expect(listed.map((x) => x.id)).toContain(p.id)
    const { stdout, last } = await collect(p.id, (s) => s.includes('\n5\n'))
    const lines = stdout.split('\n').filter(Boolean).map(Number)
    expect(lines).toEqual(lines.map((_, i) => i))
    expect(last.droppedStdoutBytes).toBe(0)
    const killed = await ok<Proc>('kill_process', { id: p.id, signal: null })
    expect(killed).toMatchObject({ state: 'exited', signal: 'SIGKILL', exitCode: null })
    const again = await ok<Read>('read_process_output', {
      id: p.id,
      stdoutOffset: 0,
      stderrOffset: null,
      waitMs: null,
    })
    expect(again.stdout.startsWith('0\n1\n2\n')).toBe(true)
  }, 120_000)

  test('write_process_stdin feeds a read loop; close ends it', async () => {
    const p = await ok<Proc>('start_process', { command: 'while read -r l; do echo "<$l>"; done; echo eof' })
    await ok('write_process_stdin', { id: p.id, data: 'a\nb\n', close: null })
    await collect(p.id, (s) => s === '<a>\n<b>\n')
    const closed = await ok<{ process: Proc }>('write_process_stdin', { id: p.id, data: 'c\n', close: true })
    expect(closed.process.stdinClosed).toBe(true)
    const end = await collect(p.id, (s, r) => r.process.state === 'exited' && s.endsWith('eof\n'))
    expect(end.stdout).toBe('<a>\n<b>\n<c>\neof\n')
    expect(end.last.process.exitCode).toBe(0)
  }, 120_000)

  test('failures are tool errors that say what is wrong: unknown id, bad signal, the limit', async () => {
    const unknown = await call('read_process_output', { id: 'p-000000000000' })
    expect(unknown.isError).toBe(true)
    expect(unknown.content[0]?.text).toContain('no process p-000000000000')
    const a = await ok<Proc>('start_process', { command: 'sleep 600' })
    const badSignal = await call('kill_process', { id: a.id, signal: 'SIGNOPE' })
    expect(badSignal.isError).toBe(true)
    expect(badSignal.content[0]?.text).toMatch(/unknown signal "SIGNOPE"/)
    await ok<Proc>('start_process', { command: 'sleep 600' })
    const over = await call('start_process', { command: 'sleep 600' })
    expect(over.isError).toBe(true)
    expect(over.content[0]?.text).toMatch(/QUOTA_EXCEEDED: .*quotas\.maxProcessesPerSession \(2\)/)
    const typo = await call('start_process', { cmd: 'x' })
    expect(typo.isError).toBe(true)
  }, 120_000)
})
