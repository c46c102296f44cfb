/**
 * MCP file tools on `sbx serve` (a child process) through the official SDK client: a 256 KiB file
 * written and read as UTF-8 text (the baseline: the path that existed before `encoding`) against the
 * same size of random bytes written and read with `encoding: 'base64'`, and a warm `bash true` for
 * scale. Round robin in one process, one MCP session, so a noisy neighbour slows each alike.
 * BENCH_ITERATIONS (default 100, at most 1000) samples per path; BENCH_FILE_KIB (default 256, at most
 * 700: base64 of the content must fit the 1 MiB request body limit).
 *
 *   npx tsx bench/mcp-files.ts            # needs the Docker engine
 */
import { randomBytes } from 'node:crypto'
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js'
import { removeScopeContainers, startSbxServer } from '../test/support/sbx-cli.js'
import { percentile } from './lib/percentile.js'

const iterations = Math.min(Math.max(Number(process.env.BENCH_ITERATIONS ?? 100) || 100, 10), 1000)
const kib = Math.min(Math.max(Number(process.env.BENCH_FILE_KIB ?? 256) || 256, 1), 700)
const warmup = 10

const prefix = `bmcpf${Date.now().toString(36)}`
// The default rate limit (per tenant) would throttle a tight loop of calls.
const serve = await startSbxServer('serve', {
  config: { queue: { prefix }, quotas: { requestsPerSecond: 100_000 } },
  env: { LOG_LEVEL: 'warn' },
})
const client = new Client({ name: 'bench-mcp-files', version: '1.0.0' })
try {
  await client.connect(
    new StreamableHTTPClientTransport(new URL(`${serve.url}/mcp`), {
      requestInit: { headers: { authorization: `Bearer ${serve.key}` } },
    }),
  )
  const text = 'abcdefghijklmno\n'.repeat((kib * 1024) / 16)
  const bytes = randomBytes(kib * 1024)
  const b64 = bytes.toString('base64')
  const call = async (name: string, args: Record<string, unknown>, check: (t: string) => boolean) => {
    const r = (await client.callTool({ name, arguments: args })) as {
      content: { text: string }[]
      isError?: boolean
    }
    const t = r.content.map((c) => c.text).join('')
    if (r.isError || !check(t)) throw new Error(`${name} failed: ${t.slice(0, 200)}`)
  }
  const paths: Record<string, () => Promise<void>> = {
    'bash true (scale)': () => call('bash', { command: 'true' }, () => true),
    'write_file utf8 (baseline)': () =>
      call('write_file', { path: 't.txt', content: text }, (t) => t.startsWith('wrote')),
    'read_file utf8 (baseline)': () => call('read_file', { path: 't.txt' }, (t) => t.length === text.length),
    'write_file base64': () =>
      call('write_file', { path: 'b.bin', content: b64, encoding: 'base64' }, (t) => t.startsWith('wrote')),
    'read_file base64': () => call('read_file', { path: 'b.bin', encoding: 'base64' }, (t) => t === b64),
  }
  const entries = Object.entries(paths)
  // Each file exists before its read is timed.
  for (let i = 0; i < warmup; i++) for (const [, fn] of entries) await fn()
  const samples = new Map<string, number[]>(entries.map(([k]) => [k, []]))
  for (let i = 0; i < iterations; i++)
    for (const [k, fn] of entries) {
      const t = performance.now()
      await fn()
      samples.get(k)?.push(performance.now() - t)
    }
  console.log(`${kib} KiB files, ${iterations} samples per path`)
  const p50: Record<string, number> = {}
  for (const [k, s] of samples) {
    p50[k] = percentile(s, 50)
    console.log(
      `${k.padEnd(28)} p50 ${percentile(s, 50).toFixed(2).padStart(7)} ms  p99 ${percentile(s, 99).toFixed(2).padStart(7)} ms`,
    )
  }
  for (const op of ['write_file', 'read_file']) {
    const ratio = (p50[`${op} base64`] ?? NaN) / (p50[`${op} utf8 (baseline)`] ?? NaN)
    console.log(`${op} base64 / utf8 (same size): ${ratio.toFixed(2)}`)
  }
} finally {
  await client.close().catch(() => undefined)
  await serve.stop()
  await removeScopeContainers(prefix)
}
