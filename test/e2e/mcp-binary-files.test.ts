/*
 * Binary-safe MCP file tools (issue 12 §6) through a real `node bin/sbx.js serve` and the official SDK
 * client: random bytes go in and come out unchanged with `encoding: 'base64'` (checked inside the
 * sandbox with sha256sum too); a binary file read as UTF-8 is an error that says so and suggests base64,
 * never mangled text; bad base64 is refused with what is wrong.
 */
import { createHash, randomBytes } from 'node:crypto'
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { removeScopeContainers, startSbxServer, uniqueName } from '../support/sbx-cli.js'
import type { SbxServer } from '../support/sbx-cli.js'

type ToolResult = { content: { type: string; text: string }[]; isError?: boolean }

const prefix = uniqueName('mcpbin')
let srv: SbxServer
let client: Client

beforeAll(async () => {
  srv = await startSbxServer('serve', { config: { queue: { prefix } } })
  client = new Client({ name: 'e2e-mcp-binary', version: '1.0.0' })
  await client.connect(
    new StreamableHTTPClientTransport(new URL(`${srv.url}/mcp`), {
      requestInit: { headers: { authorization: `Bearer ${srv.key}` } },
    }),
  )
}, 120_000)

afterAll(async () => {
  await client?.close().catch(() => undefined)
  await srv?.stop()
  await removeScopeContainers(prefix)
}, 60_000)

async function call(name: string, args: Record<string, unknown>): Promise<ToolResult> {
  return (await client.callTool({ name, arguments: args }, undefined, { timeout: 60_000 })) as ToolResult
}
const textOf = (r: ToolResult): string => r.content.map((c) => c.text).join('')

describe('MCP file tools are binary-safe', () => {
  test('random bytes round-trip through write_file and read_file with encoding base64', async () => {
    // Every byte value, then random bytes: NULs, lone continuation bytes, invalid sequences.
    const bytes = Buffer.concat([Buffer.from(Array.from({ length: 256 }, (_, i) => i)), randomBytes(65_536)])
    const sha = createHash('sha256').update(bytes).digest('hex')
    const wrote = await call('write_file', {
      path: 'bin/blob.dat',
      content: bytes.toString('base64'),
      encoding: 'base64',
    })
    expect(wrote.isError).toBeFalsy()
    expect(textOf(wrote)).toBe(`wrote ${bytes.length} bytes to bin/blob.dat`)

    const inside = await call('bash', { command: 'sha256sum bin/blob.dat; stat -c %s bin/blob.dat' })
    expect(textOf(inside)).toContain(`${sha}  bin/blob.dat`)
    expect(textOf(inside)).toContain(String(bytes.length))

    const read = await call('read_file', { path: 'bin/blob.dat', encoding: 'base64', startLine: null })
    expect(read.isError).toBeFalsy()
    expect(Buffer.from(textOf(read), 'base64').equals(bytes)).toBe(true)

    // Strict-mode clients send null for "absent": utf8 text round-trips as before.
    await call('write_file', { path: 'bin/t.txt', content: 'héllo\n', encoding: null })
    expect(textOf(await call('read_file', { path: 'bin/t.txt', encoding: 'utf8' }))).toBe('héllo\n')
    const textAsBase64 = await call('read_file', { path: 'bin/t.txt', encoding: 'base64' })
    expect(Buffer.from(textOf(textAsBase64), 'base64').toString()).toBe('héllo\n')
  }, 120_000)

  test('a binary file read or edited as text is an error suggesting base64, never mangled text', async () => {
    await call('bash', { command: "printf 'PNG\\x89\\xff\\xfe\\x00tail' > img.bin" })
    const read = await call('read_file', { path: 'img.bin' })
    expect(read.isError).toBe(true)
    expect(textOf(read)).toMatch(/img\.bin is a binary file \(11 bytes/)
    expect(textOf(read)).toContain('encoding: "base64"')
    expect(textOf(read)).not.toContain('\ufffd')
    const utf8 = await call('read_file', { path: 'img.bin', encoding: 'utf8', startLine: 1, endLine: 1 })
    expect(utf8.isError).toBe(true)

    const edit = await call('edit_file', { path: 'img.bin', oldText: 'tail', newText: 'TAIL' })
    expect(edit.isError).toBe(true)
    expect(textOf(edit)).toContain('binary')
    const base64 = await call('read_file', { path: 'img.bin', encoding: 'base64' })
    expect(Buffer.from(textOf(base64), 'base64')).toEqual(Buffer.from('PNG\x89\xff\xfe\x00tail', 'latin1'))

    const ranged = await call('read_file', { path: 'img.bin', encoding: 'base64', startLine: 2 })
    expect(ranged.isError).toBe(true)
    expect(textOf(ranged)).toContain('startLine and endLine')
  }, 120_000)

  test('content that is not base64 is refused with what is wrong, and nothing is written', async () => {
    const bad = await call('write_file', { path: 'bad.bin', content: 'aGVsbG8*', encoding: 'base64' })
    expect(bad.isError).toBe(true)
    expect(textOf(bad)).toContain('not valid base64 (character "*" at 7)')
    const length = await call('write_file', { path: 'bad.bin', content: 'aGVsb', encoding: 'base64' })
    expect(length.isError).toBe(true)
    expect(textOf(length)).toContain('wrong length or padding')
    const missing = await call('read_file', { path: 'bad.bin', encoding: 'base64' })
    expect(missing.isError).toBe(true)
    expect(textOf(missing)).toMatch(/no (such )?file:? bad\.bin/)
    // Line-wrapped base64 (as `base64` prints it) is fine; the enum is checked.
    const wrapped = await call('write_file', { path: 'ok.bin', content: 'aGVs\nbG8=\n', encoding: 'base64' })
    expect(textOf(wrapped)).toBe('wrote 5 bytes to ok.bin')
    const hex = await call('write_file', { path: 'ok.bin', content: '00', encoding: 'hex' })
    expect(hex.isError).toBe(true)
    expect(textOf(hex)).toMatch(/utf8|base64/)
  }, 120_000)
})
