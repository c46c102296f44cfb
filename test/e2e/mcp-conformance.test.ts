/*
 * The official MCP conformance suite (`@modelcontextprotocol/conformance`, its CLI under the Node 22
 * it needs, both installed in test/tools/mcp-conformance) against `/mcp` of a real
 * `node bin/sbx.js serve`. The suite cannot send a bearer header, so a loopback proxy adds it and
 * passes Host and Origin through (the DNS-rebinding scenario sends forged ones). Every server
 * scenario runs; those that do not apply to a tools-only server are the suite's own baseline of
 * expected failures (test/e2e/fixtures/mcp-conformance-baseline.yml), each listed with its reason in
 * docs/mcp.md ("MCP conformance"). Everything else must pass, check by check.
 */
import { execFile } from 'node:child_process'
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { startBearerProxy } from '../support/bearer-proxy.js'
import type { BearerProxy } from '../support/bearer-proxy.js'
import { removeScopeContainers, startSbxServer, uniqueName } from '../support/sbx-cli.js'
import type { SbxServer } from '../support/sbx-cli.js'

const ROOT = fileURLToPath(new URL('../../', import.meta.url))
const TOOLS = join(ROOT, 'test/tools/mcp-conformance')
const NODE22 = join(TOOLS, 'node_modules/node/bin/node')
const CLI = join(TOOLS, 'node_modules/@modelcontextprotocol/conformance/dist/index.js')
const BASELINE = join(ROOT, 'test/e2e/fixtures/mcp-conformance-baseline.yml')

/** Scenarios that test this server's protocol behaviour: every check must succeed. */
const APPLICABLE = [
  'server-initialize',
  'ping',
  'tools-list',
  'server-sse-multiple-streams',
  'dns-rebinding-protection',
]
/**
 * Scenarios that call a fixture tool this server does not have and still pass: an unknown tool is an
 * `isError` text result, which is all they check. Not asserted as evidence, only that they run.
 */
const VACUOUS = ['tools-call-simple-text', 'tools-call-error']

interface Check {
  id: string
  status: 'SUCCESS' | 'FAILURE' | 'WARNING' | 'INFO' | 'SKIPPED'
  errorMessage?: string
}

const baseline = (): string[] =>
  readFileSync(BASELINE, 'utf8')
    .split('\n')
    .map((l) => /^\s*-\s*([\w-]+)\s*$/.exec(l)?.[1])
    .filter((s): s is string => s !== undefined)

const prefix = uniqueName('mcpconf')
let srv: SbxServer
let proxy: BearerProxy
const out = mkdtempSync(join(tmpdir(), 'sbx-mcp-conformance-'))

beforeAll(async () => {
  if (!existsSync(NODE22) || !existsSync(CLI))
    throw new Error(
      `the MCP conformance suite is not installed in ${TOOLS}; run ` +
        '`npm ci --prefix test/tools/mcp-conformance` (the root package’s prepare script does it on npm install / npm ci)',
    )
  srv = await startSbxServer('serve', { config: { queue: { prefix } } })
  proxy = await startBearerProxy(srv.url, srv.key)
}, 120_000)

afterAll(async () => {
  await proxy?.close()
  await srv?.stop()
  await removeScopeContainers(prefix)
  rmSync(out, { recursive: true, force: true })
}, 60_000)

/** Runs the suite's CLI to its end: exit code and output. */
function conformance(args: readonly string[]): Promise<{ code: number; output: string }> {
  return new Promise((resolve) => {
    execFile(
      NODE22,
      [CLI, 'server', '--url', `${proxy.url}/mcp`, ...args],
      { timeout: 120_000, maxBuffer: 16 * 1024 * 1024 },
      (err, stdout, stderr) =>
        resolve({
          code: err ? (typeof err.code === 'number' ? err.code : 1) : 0,
          output: stdout + stderr,
        }),
    )
  })
}

/** The checks of each scenario the CLI saved in `dir` (`server-<scenario>-<timestamp>/checks.json`). */
function results(dir: string): Map<string, Check[]> {
  const map = new Map<string, Check[]>()
  for (const entry of readdirSync(dir)) {
    const m = /^server-(.+)-\d{4}-\d{2}-\d{2}T[\d-]+Z$/.exec(entry)
    if (m?.[1]) map.set(m[1], JSON.parse(readFileSync(join(dir, entry, 'checks.json'), 'utf8')) as Check[])
  }
  return map
}

describe('the official MCP conformance suite against sbx serve', () => {
  test('every server scenario that applies to a tools-only server passes; the rest are the baseline', async () => {
    const run = await conformance(['--suite', 'all', '--expected-failures', BASELINE, '-o', out])
    const byScenario = results(out)
    const failed = (name: string): string[] =>
      (byScenario.get(name) ?? [])
        .filter((c) => c.status === 'FAILURE')
        .map((c) => `${name}/${c.id}: ${c.errorMessage ?? ''}`)

    for (const name of APPLICABLE) {
      expect(byScenario.has(name), `scenario ${name} ran`).toBe(true)
      expect(failed(name)).toEqual([])
      expect(byScenario.get(name)?.some((c) => c.status === 'SUCCESS')).toBe(true)
    }
    // Every scenario of this suite version is classified: a new one must be looked at, not ignored.
    const known = new Set([...APPLICABLE, ...VACUOUS, ...baseline()])
    expect([...byScenario.keys()].filter((s) => !known.has(s))).toEqual([])
    // The suite's own verdict: nothing outside the baseline fails and every baseline entry still
    // fails (a stale entry, a scenario that now passes, exits 1 too).
    expect(run.code, run.output.slice(-4000)).toBe(0)
  }, 150_000)

  test('docs/mcp.md lists each scenario that does not apply, with a reason', () => {
    const doc = readFileSync(join(ROOT, 'docs', 'mcp.md'), 'utf8')
    expect(doc).toContain('## MCP conformance')
    const section = doc.slice(doc.indexOf('## MCP conformance'))
    for (const name of baseline()) expect(section).toMatch(new RegExp(`\\| \`${name}\` \\| \\S`))
  })
})
