/*
 * The MCP server instructions (issue 12 §6) through a real `node bin/sbx.js serve` and the official SDK
 * client: they tell the model how a session works (its own sandbox per MCP session, the persistent
 * shell, timeouts, the output cap, the file tools, idle expiry), with the profile's real numbers, and
 * what they claim holds: `cd` and exports stay, another MCP session starts empty. A profile with
 * `shell: fresh` is described as such, in the instructions and in the bash tool description.
 */
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js'
import { afterAll, describe, expect, test } from 'vitest'
import { removeScopeContainers, startSbxServer, uniqueName } from '../support/sbx-cli.js'
import type { SbxServer } from '../support/sbx-cli.js'

type ToolResult = { content: { type: string; text: string }[]; isError?: boolean }

const prefix = uniqueName('mcpinstr')
const servers: SbxServer[] = []
const clients: Client[] = []

afterAll(async () => {
  for (const c of clients) await c.close().catch(() => undefined)
  for (const s of servers) await s.stop()
  await removeScopeContainers(prefix)
}, 60_000)

async function connect(srv: SbxServer): Promise<Client> {
  const client = new Client({ name: 'e2e-mcp-instructions', version: '1.0.0' })
  await client.connect(
    new StreamableHTTPClientTransport(new URL(`${srv.url}/mcp`), {
      requestInit: { headers: { authorization: `Bearer ${srv.key}` } },
    }),
  )
  clients.push(client)
  return client
}
const bash = async (client: Client, command: string): Promise<string> => {
  const r = (await client.callTool({ name: 'bash', arguments: { command } })) as ToolResult
  return r.content.map((c) => c.text).join('')
}

describe('MCP server instructions', () => {
  test('describe the session with the profile’s numbers, and what they say holds', async () => {
    const srv = await startSbxServer('serve', {
      config: {
        queue: { prefix },
        server: { mcpSessionIdleMs: 300_000 },
        profiles: {
          default: {
            provider: 'docker',
            defaultTimeoutMs: 45_000,
            maxTimeoutMs: 120_000,
            outputCapBytes: 262_144,
          },
        },
      },
    })
    servers.push(srv)
    const a = await connect(srv)
    const text = a.getInstructions() ?? ''
    expect(text).toContain('One MCP session is one sandbox session')
    expect(text).toMatch(/Persistent shell state: .*`cd`, exported variables/)
    expect(text).toContain('default 45000 ms, at most 120000 ms')
    expect(text).toContain('capped at 262144 bytes')
    expect(text).toContain('[output truncated at the output cap]')
    for (const tool of ['read_file', 'write_file', 'edit_file', 'base64']) expect(text).toContain(tool)
    expect(text).toContain('after 5 min without a request')
    expect(text).toContain('no network access')
    // Clients that do not hand instructions to the model (the Agents SDK) still show it the tool description.
    const { tools } = await a.listTools()
    expect(tools.find((t) => t.name === 'bash')?.description).toContain('One persistent shell per session')

    // What they claim: cd and exports stay between calls; another MCP session starts empty.
    await bash(a, 'mkdir -p src && cd src && export GREETING=hi && echo kept > note.txt')
    expect(await bash(a, 'pwd; echo "$GREETING"')).toContain('stdout:\n/workspace/src\nhi\n')
    const b = await connect(srv)
    expect(await bash(b, 'pwd; echo "${GREETING:-unset}"; ls src 2>&1 || true')).toMatch(
      /stdout:\n\/workspace\nunset\n.*No such file/s,
    )
  }, 120_000)

  test('a profile with shell: fresh is described as keeping no shell state', async () => {
    const srv = await startSbxServer('serve', {
      config: { queue: { prefix }, profiles: { default: { provider: 'docker', shell: 'fresh' } } },
    })
    servers.push(srv)
    const client = await connect(srv)
    const text = client.getInstructions() ?? ''
    expect(text).toContain('No shell state carries over')
    expect(text).not.toContain('Persistent shell state')
    const { tools } = await client.listTools()
    expect(tools.find((t) => t.name === 'bash')?.description).toContain('fresh shell')
    await bash(client, 'cd /tmp')
    expect(await bash(client, 'pwd')).toContain('stdout:\n/workspace\n')
  }, 120_000)
})
