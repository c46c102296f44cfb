/*
 * One-shot MCP clients never send DELETE (the Inspector CLI, the AI SDK). Through a real
 * `node bin/sbx.js serve` with a tenant quota of one sandbox: an idle MCP session expires after
 * `server.mcpSessionIdleMs`, its sandbox is destroyed and the quota is free again; a call running
 * longer than the idle time keeps its session; the quota refusal itself is an `isError` result.
 */
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { removeScopeContainers, scopeContainers, startSbxServer, uniqueName } from '../support/sbx-cli.js'
import type { SbxServer } from '../support/sbx-cli.js'

type ToolResult = { content: { type: string; text: string }[]; isError?: boolean }
const IDLE_MS = 1_500

const prefix = uniqueName('mcpidle')
let srv: SbxServer

beforeAll(async () => {
  srv = await startSbxServer('serve', {
    config: {
      queue: { prefix },
      server: { mcpSessionIdleMs: IDLE_MS },
      quotas: { maxSandboxes: 1, maxConcurrentJobs: 64, requestsPerSecond: 50 },
    },
  })
}, 120_000)

afterAll(async () => {
  await srv?.stop()
  await removeScopeContainers(prefix)
}, 60_000)

/** A one-shot client: it connects and calls, and never closes its session. */
async function connect(): Promise<{ client: Client; sid: string }> {
  const transport = new StreamableHTTPClientTransport(new URL(`${srv.url}/mcp`), {
    requestInit: { headers: { authorization: `Bearer ${srv.key}` } },
  })
  const client = new Client({ name: 'e2e-one-shot', version: '1.0.0' })
  await client.connect(transport)
  return { client, sid: transport.sessionId ?? '' }
}
const bash = async (client: Client, command: string): Promise<ToolResult> =>
  (await client.callTool({ name: 'bash', arguments: { command } })) as ToolResult
const textOf = (r: ToolResult): string => r.content.map((c) => c.text).join('')

describe('idle MCP sessions expire and release their sandboxes', () => {
  test('a one-shot client does not lock the tenant out', async () => {
    const a = await connect()
    // Twice the idle time inside one call: a running call keeps its session.
    const long = await bash(a.client, `sleep ${(2 * IDLE_MS) / 1000}; echo a > f; cat f`)
    expect(long.isError).toBeFalsy()
    expect(textOf(long)).toContain('a')

    // The tenant's one sandbox is A's: B is refused, and the refusal is an error result.
    const b = await connect()
    const refused = await bash(b.client, 'echo b')
    expect(refused.isError).toBe(true)
    expect(textOf(refused)).toContain('QUOTA_EXCEEDED')

    // A never closes: its session expires (the server logs it) and its container goes.
    await srv.child.next(
      (l) =>
        l.json?.['msg'] === 'MCP session expired (idle); its sandbox session was deleted' &&
        l.json['mcpSession'] === a.sid,
      30_000,
    )
    expect(await scopeContainers(prefix)).toEqual([])

    // The quota is free again for a new session.
    const c = await connect()
    const ok = await bash(c.client, 'echo c')
    expect(ok.isError).toBeFalsy()
    expect(textOf(ok)).toContain('c')

    // A's next request says its session expired and its files are gone.
    const late = await bash(a.client, 'cat f').then(
      () => 'answered',
      (err: unknown) => String(err),
    )
    expect(late).toContain('expired')
    expect(late).toContain('initialize a new session')
    await c.client.close()
  }, 120_000)
})
