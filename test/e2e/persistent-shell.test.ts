import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import {
  fleetConfig,
  removeScopeContainers,
  startSbxServer,
  startSbxWorker,
  uniqueName,
} from '../support/sbx-cli.js'
import type { SbxServer } from '../support/sbx-cli.js'

interface ToolCallAnswer {
  output: string
  result?: {
    exitCode: number | null
    stdout: string
    stderr: string
    timedOut: boolean
    shellRestarted?: boolean
  }
}
interface JobAnswer {
  state: string
  result?: { exitCode: number | null; stdout: string; shellRestarted?: boolean }
  error?: { code: string; message: string }
}

/**
 * Persistent shells through `node bin/sbx.js serve` on the real engine: a session's `bash` tool
 * calls share one shell (cd, export, functions stay; a timeout keeps it; `exit` restarts it and the
 * next result says so), and `/v1/exec` stays fresh unless the call asks for `shell: 'persistent'`.
 */
describe('persistent shells through sbx serve', () => {
  const scope = uniqueName('pshell')
  let srv: SbxServer

  beforeAll(async () => {
    // Tool calls take the profile's timeout: 3 s here, so that `sleep 60` times out quickly.
    srv = await startSbxServer('serve', {
      config: {
        queue: { prefix: scope },
        profiles: { default: { provider: 'docker', defaultTimeoutMs: 3000 } },
      },
    })
  }, 180_000)

  afterAll(async () => {
    await srv?.stop()
    await removeScopeContainers(scope)
  }, 60_000)

  const bash = async (sessionId: string, command: string, extra: Record<string, unknown> = {}) => {
    const res = await srv.post('/v1/tool-calls', {
      name: 'bash',
      arguments: { command, ...extra },
      sessionId,
    })
    expect(res.status).toBe(200)
    const answer = (await res.json()) as ToolCallAnswer
    expect(answer.result, answer.output).toBeDefined()
    return answer
  }
  const exec = async (body: Record<string, unknown>) => {
    const res = await srv.post('/v1/exec', { provider: 'docker', profile: 'default', ...body })
    expect(res.status).toBe(200)
    return (await res.json()) as JobAnswer
  }

  test('tool calls: cd, then pwd in the next call prints the new directory', async () => {
    await bash('cd', 'cd /tmp')
    const r = await bash('cd', 'pwd')
    expect(r.result?.stdout).toBe('/tmp\n')
    expect(r.result?.shellRestarted).toBe(false)
  }, 120_000)

  test('tool calls: an exported variable and a function are there in the next call', async () => {
    await bash('export', 'export X=1; greet() { echo "hi $1"; }')
    const r = await bash('export', 'echo $X; greet you')
    expect(r.result?.stdout).toBe('1\nhi you\n')
    expect(r.output).toContain('stdout:\n1\nhi you')
  }, 120_000)

  test('tool calls: a timeout kills the command and keeps the cd', async () => {
    await bash('timeout', 'cd /tmp')
    const t = await bash('timeout', 'sleep 60')
    const timedOut = t.result
    expect(timedOut).toMatchObject({ timedOut: true })
    expect(t.output).toContain('[timed out')
    const r = await bash('timeout', 'pwd')
    expect(r.result?.stdout).toBe('/tmp\n')
    expect(r.result?.shellRestarted).toBe(false)
  }, 120_000)

  test('tool calls: exit 3 ends the shell; the next call works and says the shell restarted', async () => {
    await bash('exit', 'cd /tmp; export X=1')
    const e = await bash('exit', 'exit 3')
    expect(e.result?.exitCode).toBe(3)
    const r = await bash('exit', 'pwd; echo "[$X]"')
    expect(r.result).toMatchObject({ exitCode: 0, stdout: '/workspace\n[]\n', shellRestarted: true })
    expect(r.output).toContain('[shell restarted')
    expect((await bash('exit', 'true')).result?.shellRestarted).toBe(false)
  }, 120_000)

  test('/v1/exec stays fresh by default; shell: persistent opts in', async () => {
    await exec({ sessionId: 'exec', command: 'cd /tmp' })
    const fresh = await exec({ sessionId: 'exec', command: 'pwd' })
    expect(fresh.result?.stdout).toBe('/workspace\n')
    expect(fresh.result?.shellRestarted).toBeUndefined()
    await exec({ sessionId: 'exec', command: 'cd /tmp', shell: 'persistent' })
    const kept = await exec({ sessionId: 'exec', command: 'pwd', shell: 'persistent' })
    expect(kept.result).toMatchObject({ stdout: '/tmp\n', shellRestarted: false })
    // The fresh path is untouched by the persistent shell's cd.
    expect((await exec({ sessionId: 'exec', command: 'pwd', shell: 'fresh' })).result?.stdout).toBe(
      '/workspace\n',
    )
  }, 120_000)

  test('MCP bash (SDK client): cd and export stay for the next call', async () => {
    const transport = new StreamableHTTPClientTransport(new URL(`${srv.url}/mcp`), {
      requestInit: { headers: { authorization: `Bearer ${srv.key}` } },
    })
    const client = new Client({ name: 'e2e-shell', version: '1.0.0' })
    await client.connect(transport)
    try {
      const first = (await client.callTool({
        name: 'bash',
        arguments: { command: 'cd /tmp; export M=mcp' },
      })) as {
        isError?: boolean
      }
      expect(first.isError).toBeFalsy()
      const r = (await client.callTool({ name: 'bash', arguments: { command: 'pwd; echo $M' } })) as {
        content: { text: string }[]
      }
      expect(r.content[0]?.text).toContain('/tmp\nmcp')
    } finally {
      await client.close()
    }
  }, 120_000)

  test('/v1/exec: an unknown shell mode is a 400 that names the field', async () => {
    const res = await srv.post('/v1/exec', {
      provider: 'docker',
      profile: 'default',
      command: 'pwd',
      shell: 'tmux',
    })
    expect(res.status).toBe(400)
    expect(await res.text()).toMatch(/shell/)
  })
})

/** The job's shell fields cross Redis: `sbx api` + `sbx worker` keep a session's shell too. */
describe('persistent shells through sbx api + sbx worker', () => {
  const scope = uniqueName('pshellf')
  const started: { stop(): Promise<void> }[] = []
  afterAll(async () => {
    for (const s of started.reverse()) await s.stop()
    await removeScopeContainers(scope)
  }, 60_000)

  test('tool calls keep cd across calls; /v1/exec shell: persistent shares that shell', async () => {
    const config = fleetConfig(scope)
    const api = await startSbxServer('api', { config })
    started.push(api)
    started.push(await startSbxWorker({ config }))
    const call = async (command: string) => {
      const res = await api.post('/v1/tool-calls', { name: 'bash', arguments: { command }, sessionId: 'f' })
      expect(res.status).toBe(200)
      return ((await res.json()) as ToolCallAnswer).result
    }
    await call('cd /tmp; export F=fleet')
    expect(await call('pwd; echo $F')).toMatchObject({ stdout: '/tmp\nfleet\n', shellRestarted: false })
    const res = await api.post('/v1/exec', {
      provider: 'docker',
      profile: 'default',
      sessionId: 'f',
      command: 'pwd',
      shell: 'persistent',
    })
    expect(((await res.json()) as JobAnswer).result).toMatchObject({
      stdout: '/tmp\n',
      shellRestarted: false,
    })
  }, 180_000)
})
