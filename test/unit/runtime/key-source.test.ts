import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, expect, test } from 'vitest'
import { ConfigSchema } from '../../../src/config/schema.js'
import { describeKeySource, resolveApiKeys } from '../../../src/cli/api-keys.js'

const noKeys = ConfigSchema.parse({})
const keyFile = (): string => join(mkdtempSync(join(tmpdir(), 'sbx-keys-')), '.sbx', 'api-key')

describe('resolveApiKeys: where the key comes from, and the banner line that says so', () => {
  test('environment: nothing written, an existing file named as ignored, the key never printed', () => {
    const file = keyFile()
    const env = resolveApiKeys(noKeys, { SBX_API_KEY: 'sbx_env_secret_123456' }, file)
    expect(env.source).toEqual({ kind: 'env', variable: 'SBX_API_KEY', keyFile: file, keyFileIgnored: false })
    const line = describeKeySource(env.source)
    expect(line).toContain('from the environment variable SBX_API_KEY, not written to disk')
    expect(line).not.toContain('sbx_env_secret_123456')
    expect(() => readFileSync(file)).toThrow()
  })

  test('a key from the environment shorter than 16 characters is refused with the fix', () => {
    expect(() => resolveApiKeys(noKeys, { SBX_API_KEY: 'short' }, keyFile())).toThrow(
      /SBX_API_KEY is shorter than 16 characters; set a random key/,
    )
  })

  test('generated, then read from the file; an empty file is an error with the fix', () => {
    const file = keyFile()
    const first = resolveApiKeys(noKeys, {}, file)
    expect(first.source).toEqual({ kind: 'generated', keyFile: file })
    expect(describeKeySource(first.source)).toContain(`generated and stored in ${file} (mode 0600)`)
    const second = resolveApiKeys(noKeys, {}, file)
    expect(second.source).toEqual({ kind: 'file', keyFile: file })
    expect(second.entries[0]?.key).toBe(first.entries[0]?.key)
    expect(describeKeySource(second.source)).not.toContain(first.entries[0]?.key ?? '?')
    writeFileSync(file, '\n')
    expect(() => resolveApiKeys(noKeys, {}, file)).toThrow(/is empty; delete it/)
  })

  test('config keys: counted, no embedded key', () => {
    const config = ConfigSchema.parse({ apiKeys: [{ key: 'k'.repeat(24), tenant: 'a' }] })
    const keys = resolveApiKeys(config, {}, keyFile())
    expect(keys.source).toEqual({ kind: 'config', count: 1 })
    expect(describeKeySource(keys.source)).toMatch(/^API keys: 1 from config `apiKeys`/)
  })
})
