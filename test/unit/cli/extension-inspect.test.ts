import { execFile } from 'node:child_process'
import { mkdtempSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { promisify } from 'node:util'
import { describe, expect, test } from 'vitest'
import { runCli } from '../../../src/cli/run.js'
import type { CliIO } from '../../../src/cli/output.js'

function capture(): CliIO & { lines: string[]; errors: string[] } {
  const lines: string[] = []
  const errors: string[] = []
  return { lines, errors, tty: false, out: (l) => void lines.push(l), err: (l) => void errors.push(l) }
}

const dir = mkdtempSync(join(tmpdir(), 'sbx-cli-'))
const file = join(dir, 'safety-pack.mjs')
writeFileSync(
  file,
  `export default {
    manifest: { id: 'safety-pack', name: 'Safety Pack', version: '1.2.0', vendor: 'acme', capabilities: ['interceptor', 'lifecycle'] },
    apply(ctx) {
      ctx.interceptors.registerToolCall({ name: 'sandbox-bash', beforeToolCall: () => ({ kind: 'allow' }) })
      ctx.interceptors.registerPrompt({ name: 'pii', intercept: () => ({ kind: 'allow' }) })
      ctx.lifecycle.register({ name: 'audit', onEvent() {} })
      ctx.lifecycle.register({ name: 'stats', onEvent() {} })
    },
  }`,
)

describe('sbx extension inspect', () => {
  test('prints manifest, capabilities and one line per contribution kind', async () => {
    const io = capture()
    expect(await runCli(['extension', 'inspect', file], io)).toBe(0)
    const text = io.lines.join('\n')
    expect(text).toContain('id=safety-pack')
    expect(text).toContain('version=1.2.0')
    expect(text).toContain('vendor=acme')
    expect(text).toContain('capabilities=interceptor,lifecycle')
    expect(text).toContain('lifecycleHooks=2 (audit, stats)')
    expect(text).toContain('toolCallInterceptors=1 (sandbox-bash)')
    expect(text).toContain('promptInterceptors=1 (pii)')
    expect(text).toContain('tools=0')
  })

  test('--json for scripts', async () => {
    const io = capture()
    expect(await runCli(['extension', 'inspect', file, '--json'], io)).toBe(0)
    const parsed = JSON.parse(io.lines[0] ?? '{}') as { lifecycleHooks: string[]; manifest: { id: string } }
    expect(parsed.manifest.id).toBe('safety-pack')
    expect(parsed.lifecycleHooks).toEqual(['audit', 'stats'])
  })

  test('a missing module is a clear error with exit code 1; no argument is a usage error', async () => {
    const io = capture()
    expect(await runCli(['extension', 'inspect', './nope.mjs'], io)).toBe(1)
    expect(io.errors.join('\n')).toMatch(/EXTENSION_ERROR: cannot load extension module/)
    const io2 = capture()
    expect(await runCli(['extension', 'inspect'], io2)).toBe(2)
    expect(io2.errors.join('\n')).toMatch(/usage: sbx extension inspect/)
  })

  test('the real bin runs it in a child process', async () => {
    const { stdout } = await promisify(execFile)(
      process.execPath,
      ['bin/sbx.js', 'extension', 'inspect', file],
      {
        cwd: process.cwd(),
      },
    )
    expect(stdout).toContain('lifecycleHooks=2')
  })
})

describe('sbx extension inspect <id> from the config', () => {
  test('an id listed in the config file is found by id', async () => {
    const cfgDir = mkdtempSync(join(tmpdir(), 'sbx-cli-cfg-'))
    writeFileSync(join(cfgDir, 'sandbox-router.config.json'), JSON.stringify({ extensions: [file] }))
    const io = capture()
    expect(
      await runCli(
        ['extension', 'inspect', 'safety-pack', '--config', join(cfgDir, 'sandbox-router.config.json')],
        io,
      ),
    ).toBe(0)
    expect(io.lines.join('\n')).toContain('id=safety-pack')
  })
})
