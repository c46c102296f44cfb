import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import {
  configDir,
  removeScopeContainers,
  runSbx,
  scopeContainers,
  startSbxServer,
  uniqueName,
} from '../support/sbx-cli.js'
import type { SbxServer } from '../support/sbx-cli.js'

/*
 * F8 and F9 through `sbx serve` and the `sbx` CLI: input that cannot work is a 400 naming the field
 * and the rule before any job exists — session ids "." and "..", NUL in a command, cwd or env value,
 * env maps past the sandbox's limits, commands longer than one shell argument, and bodies that are not
 * UTF-8 — on /v1/exec, /v1/sessions, /v1/tool-calls, /v1/agent-runs, MCP and the CLI. That nothing
 * ran is checked from outside: the test's scope has no container until the last test runs valid input
 * at the bounds.
 */

const prefix = uniqueName('inval')
const config = { queue: { prefix }, server: { bodyLimitBytes: 4 * 1_048_576 } }
const cwd = configDir(config)
let srv: SbxServer

beforeAll(async () => {
  srv = await startSbxServer('serve', { config, cwd })
}, 120_000)

afterAll(async () => {
  await srv?.stop()
  await removeScopeContainers(prefix)
}, 60_000)

const EXEC = { provider: 'docker', profile: 'default' } as const

/** Expects a 400 BAD_REQUEST whose message names `field` and matches `rule`. */
async function expectBadRequest(res: Response, field: string, rule: RegExp): Promise<string> {
  const text = await res.text()
  expect(res.status, text).toBe(400)
  const { error } = JSON.parse(text) as { error: { code: string; message: string } }
  expect(error.code).toBe('BAD_REQUEST')
  expect(error.message).toContain(`"${field}"`)
  expect(error.message).toMatch(rule)
  return error.message
}

/** POSTs raw bytes as JSON. */
function postBytes(path: string, bytes: Uint8Array, headers: Record<string, string> = {}): Promise<Response> {
  return srv.fetch(path, {
    method: 'POST',
    body: bytes,
    headers: { 'content-type': 'application/json', ...headers },
  })
}

/** `{"…": "<prefix><bad bytes>"}`-style JSON whose only fault is an invalid UTF-8 sequence. */
function withInvalidUtf8(before: string, after: string): Uint8Array {
  const enc = new TextEncoder()
  return new Uint8Array([...enc.encode(before), 0xff, 0xc0, 0xaf, ...enc.encode(after)])
}

const DOT_RULE = /not "\." or "\.\."/

describe('session ids "." and ".." (F8)', () => {
  test('are refused by every body that names a session', async () => {
    for (const id of ['.', '..']) {
      await expectBadRequest(await srv.post('/v1/sessions', { id }), 'id', DOT_RULE)
      await expectBadRequest(
        await srv.post('/v1/exec?wait=false', { ...EXEC, sessionId: id, command: 'true' }),
        'sessionId',
        DOT_RULE,
      )
      await expectBadRequest(
        await srv.post('/v1/tool-calls', { name: 'bash', arguments: { command: 'true' }, sessionId: id }),
        'sessionId',
        DOT_RULE,
      )
      await expectBadRequest(
        await srv.post('/v1/agent-runs', { input: 'hi', sessionId: id }),
        'sessionId',
        DOT_RULE,
      )
    }
    const { sessions } = (await (await srv.fetch('/v1/sessions')).json()) as { sessions: unknown[] }
    expect(sessions).toEqual([])
  })

  test('are refused by the CLI: `sbx exec --session` and `sbx sessions rm`', async () => {
    const exec = await runSbx(['exec', '--session', '..', '--', 'echo ran'], { cwd })
    expect(exec.code).not.toBe(0)
    expect(exec.stdout).not.toContain('ran')
    expect(exec.stderr).toContain('--session')
    expect(exec.stderr).toMatch(DOT_RULE)

    const rm = await runSbx(['sessions', 'rm', '..', '--url', srv.url, '--key', srv.key], { cwd })
    expect(rm.code).not.toBe(0)
    expect(rm.stderr).toMatch(DOT_RULE)
  }, 120_000)
})

describe('input that would fail as a job is a 400 first (F9)', () => {
  test('NUL in command, cwd or an env value names that field', async () => {
    const nul = /NUL/
    await expectBadRequest(
      await srv.post('/v1/exec?wait=false', { ...EXEC, command: 'echo a\u0000b' }),
      'command',
      nul,
    )
    await expectBadRequest(
      await srv.post('/v1/exec?wait=false', { ...EXEC, command: 'pwd', cwd: '/workspace\u0000x' }),
      'cwd',
      nul,
    )
    const env = await expectBadRequest(
      await srv.post('/v1/exec?wait=false', { ...EXEC, command: 'true', env: { A: 'x\u0000y' } }),
      'env.A',
      nul,
    )
    expect(env).not.toMatch(/names are/)
    await expectBadRequest(
      await srv.post('/v1/tool-calls', { name: 'bash', arguments: { command: 'echo a\u0000b' } }),
      'arguments.command',
      nul,
    )
    await expectBadRequest(
      await srv.post('/v1/tool-calls', {
        name: 'bash',
        arguments: JSON.stringify({ command: 'pwd', cwd: '/tmp\u0000' }),
      }),
      'arguments.cwd',
      nul,
    )
  })

  test('env maps and commands past the sandbox limits name the bound', async () => {
    const many = Object.fromEntries(Array.from({ length: 20_000 }, (_, i) => [`V${i}`, 'x']))
    await expectBadRequest(
      await srv.post('/v1/exec?wait=false', { ...EXEC, command: 'true', env: many }),
      'env',
      /20000 variables; at most 2048/,
    )
    await expectBadRequest(
      await srv.post('/v1/exec?wait=false', { ...EXEC, command: 'true', env: { A: 'x'.repeat(131_080) } }),
      'env.A',
      /at most 131071/,
    )
    const big = Object.fromEntries(Array.from({ length: 9 }, (_, i) => [`B${i}`, 'x'.repeat(120_000)]))
    await expectBadRequest(
      await srv.post('/v1/exec?wait=false', { ...EXEC, command: 'true', env: big }),
      'env',
      /at most 1048576/,
    )
    // 131,073 bytes as UTF-8 in 65,538 characters: under the character cap, over one shell argument.
    await expectBadRequest(
      await srv.post('/v1/exec?wait=false', { ...EXEC, command: `###${'é'.repeat(65_535)}` }),
      'command',
      /131073 bytes as UTF-8; at most 131071/,
    )
  })

  test('a body that is not UTF-8 is a 400 on exec, tool calls and sessions, not a U+FFFD', async () => {
    const utf8 = /not valid UTF-8/
    await expectBadRequest(
      await postBytes(
        '/v1/exec?wait=false',
        withInvalidUtf8('{"provider":"docker","profile":"default","command":"echo ', '"}'),
      ),
      '(body)',
      utf8,
    )
    await expectBadRequest(
      await postBytes('/v1/tool-calls', withInvalidUtf8('{"name":"read","arguments":"', '"}')),
      '(body)',
      utf8,
    )
    await expectBadRequest(await postBytes('/v1/sessions', withInvalidUtf8('{"id":"s', '"}')), '(body)', utf8)
  })

  test('a UTF-8 body with a leading byte-order mark is read as its JSON, as web decoding reads it', async () => {
    const bom = new Uint8Array([0xef, 0xbb, 0xbf])
    const body = new TextEncoder().encode('{"provider":"nope","profile":"default","command":"echo bom"}')
    const res = await postBytes('/v1/exec?wait=false', new Uint8Array([...bom, ...body]))
    // Parsed: the provider named in the JSON is what is refused, not the JSON itself.
    expect(res.status).toBe(400)
    const err = (await res.json()) as { error: { code: string; message: string } }
    expect(err.error.code).toBe('UNKNOWN_PROVIDER')
    expect(err.error.message).toMatch(/nope/)
  })

  test('MCP: bash with a NUL is refused before it runs; a non-UTF-8 body is a 400', async () => {
    const transport = new StreamableHTTPClientTransport(new URL(`${srv.url}/mcp`), {
      requestInit: { headers: { authorization: `Bearer ${srv.key}` } },
    })
    const mcp = new Client({ name: 'inval', version: '1.0.0' })
    await mcp.connect(transport)
    try {
      const message = await mcp
        .callTool({ name: 'bash', arguments: { command: 'echo a\u0000b' } })
        .then((r) => JSON.stringify(r.content))
        .catch((err: unknown) => String(err))
      expect(message).toMatch(/command/)
      expect(message).toMatch(/NUL/)
      expect(message).not.toMatch(/BAD_REQUEST command and cwd/) // the sandbox's own refusal: it ran as a job
    } finally {
      await mcp.close()
    }
    const res = await postBytes(
      '/mcp',
      withInvalidUtf8('{"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":"', '"}}'),
      { accept: 'application/json, text/event-stream' },
    )
    await expectBadRequest(res, '(body)', /not valid UTF-8/)
  })

  test('nothing above created a sandbox; valid input at the bounds runs', async () => {
    expect(await scopeContainers(prefix, true)).toEqual([])
    // 2,048 variables (one of 131,062 bytes) and a command of 131,055 bytes: all within the bounds.
    const env = Object.fromEntries(Array.from({ length: 2_047 }, (_, i) => [`V${i}`, 'x']))
    const atBounds = await srv.post('/v1/exec', {
      ...EXEC,
      command: `#${'é'.repeat(65_520)}\necho "$V2046"`,
      env: { ...env, A: 'y'.repeat(131_060) },
    })
    expect(atBounds.status).toBe(200)
    expect(await atBounds.json()).toMatchObject({ state: 'completed', result: { stdout: 'x\n' } })
  }, 120_000)
})
