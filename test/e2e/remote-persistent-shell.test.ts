/*
 * Persistent shells on the remote providers through `node bin/sbx.js serve`: with the server's
 * tool-call routing pointed at Daytona or E2B (the local Daytona fake, our own E2B endpoint on
 * Docker; driven by the real SDKs), a
 * session's `bash` calls over `/v1/tool-calls` and MCP share one shell — `cd`, exports and
 * functions stay, a timeout keeps the shell, `exit` restarts it and the next result says so.
 */
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { type FakeDaytona, startFakeDaytona } from '../fakes/daytona/index.js'
import { type E2BEndpoint, startE2BEndpoint } from '../support/e2b-endpoint.js'
import { type LiveService, startLiveService } from '../support/live-service.js'
import { uniqueName } from '../support/sbx-cli.js'

const KEY = 'remote-shell-key-0123456789abcdef'

interface ToolCallAnswer {
  output: string
  result?: { exitCode: number | null; stdout: string; timedOut: boolean; shellRestarted?: boolean }
}

describe.each(['daytona', 'e2b'] as const)('persistent shells on %s through sbx serve', (provider) => {
  const scope = uniqueName(`rshell-${provider}`)
  const profile = `remote-${provider}`
  let fake: FakeDaytona | E2BEndpoint
  let live: LiveService

  beforeAll(async () => {
    fake = provider === 'daytona' ? await startFakeDaytona() : await startE2BEndpoint()
    const env: Record<string, string> =
      provider === 'daytona'
        ? { DAYTONA_API_KEY: fake.apiKey, DAYTONA_API_URL: (fake as FakeDaytona).apiUrl }
        : {
            E2B_API_KEY: fake.apiKey,
            E2B_API_URL: (fake as E2BEndpoint).apiUrl,
            E2B_SANDBOX_URL: (fake as E2BEndpoint).sandboxUrl,
          }
    live = await startLiveService({
      prefix: scope,
      keys: [{ key: KEY, tenant: 'acme' }],
      config: {
        profiles: {
          [profile]: {
            provider,
            ...(provider === 'daytona' ? { snapshot: 'sbx-test' } : { template: 'base' }),
            // Tool calls take the profile's timeout: 2 s, so that `sleep 60` times out quickly.
            defaultTimeoutMs: 2_000,
          },
        },
        routing: { shell: { providerId: provider, profile } },
      },
      env,
    })
  }, 120_000)

  afterAll(async () => {
    await live?.close()
    await fake?.close()
  }, 120_000)

  const bash = async (sessionId: string, command: string): Promise<ToolCallAnswer> => {
    const res = await fetch(`${live.server.url}/v1/tool-calls`, {
      method: 'POST',
      headers: { authorization: `Bearer ${KEY}`, 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'bash', arguments: JSON.stringify({ command }), sessionId }),
    })
    expect(res.status).toBe(200)
    const answer = (await res.json()) as ToolCallAnswer
    expect(answer.result, answer.output).toBeDefined()
    return answer
  }

  test('tool calls: cd, export and a function stay for the next call', async () => {
    await bash('state', 'cd /tmp; export X=41; inc() { echo $(( $1 + 1 )); }')
    const r = await bash('state', 'pwd; inc $X')
    expect(r.result).toMatchObject({ exitCode: 0, stdout: '/tmp\n42\n', shellRestarted: false })
  }, 120_000)

  test('tool calls: a timeout keeps the shell; exit restarts it and the next result says so', async () => {
    await bash('life', 'cd /tmp')
    const slow = await bash('life', 'sleep 60')
    expect(slow.result?.timedOut).toBe(true)
    expect((await bash('life', 'pwd')).result).toMatchObject({ stdout: '/tmp\n', shellRestarted: false })
    expect((await bash('life', 'exit 3')).result?.exitCode).toBe(3)
    const after = await bash('life', 'pwd')
    expect(after.result).toMatchObject({ stdout: '/workspace\n', shellRestarted: true })
    expect(after.output).toContain('shell restarted')
  }, 120_000)

  test('MCP bash (SDK client): cd and export stay for the next call', async () => {
    const transport = new StreamableHTTPClientTransport(new URL(`${live.server.url}/mcp`), {
      requestInit: { headers: { authorization: `Bearer ${KEY}` } },
    })
    const client = new Client({ name: `e2e-remote-shell-${provider}`, version: '1.0.0' })
    await client.connect(transport)
    try {
      const first = (await client.callTool({
        name: 'bash',
        arguments: { command: 'cd /tmp; export M=mcp' },
      })) as { isError?: boolean }
      expect(first.isError).toBeFalsy()
      const r = (await client.callTool({ name: 'bash', arguments: { command: 'pwd; echo $M' } })) as {
        content: { text: string }[]
      }
      expect(r.content[0]?.text).toContain('/tmp\nmcp')
    } finally {
      await client.close()
    }
  }, 120_000)
})
