import { randomBytes } from 'node:crypto'
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs'
import { dirname } from 'node:path'
import type { Config } from '../config/schema.js'
import { AppError, assertNever } from '../errors.js'
import type { KeyEntry } from '../http/keyring.js'

/** Where the API keys of a process came from (what the start-up banner tells; never the key itself). */
export type KeySource =
  /** Config `apiKeys` (`key`, `keyEnv` or `sha256`): `count` entries. */
  | { kind: 'config'; count: number }
  /** The embedded default key from an environment variable (nothing is written to disk). */
  | { kind: 'env'; variable: string; keyFile: string; keyFileIgnored: boolean }
  /** The embedded default key read from an existing key file. */
  | { kind: 'file'; keyFile: string }
  /** The embedded default key generated now and written to the key file (mode 0600). */
  | { kind: 'generated'; keyFile: string }

/** The keyring entries of a config, plus the plain keys (for log redaction only). */
export interface ResolvedKeys {
  entries: KeyEntry[]
  /** Plain keys known to this process: masked in every log line. */
  secrets: string[]
  /** Where the keys came from. */
  source: KeySource
}

/**
 * API keys from config (`key`, `keyEnv` or `sha256`). With none configured (the embedded default),
 * one admin key for tenant `default` comes from env `SBX_API_KEY`, else from `keyFile`, else it is
 * generated and written there (mode 0600) so the quickstart's `curl` can read it.
 */
export function resolveApiKeys(
  config: Config,
  env: Readonly<Record<string, string | undefined>>,
  keyFile: string,
): ResolvedKeys {
  if (config.apiKeys.length > 0) {
    const entries: KeyEntry[] = []
    const secrets: string[] = []
    for (const k of config.apiKeys) {
      let key = k.key
      if (k.keyEnv) {
        key = env[k.keyEnv]
        if (!key)
          throw new AppError(
            'CONFIG_INVALID',
            `API key of tenant "${k.tenant}": environment variable ${k.keyEnv} is not set`,
          )
      }
      if (key) secrets.push(key)
      entries.push({
        ...(key ? { key } : {}),
        ...(k.sha256 ? { sha256: k.sha256 } : {}),
        tenant: k.tenant,
        admin: k.admin,
      })
    }
    return { entries, secrets, source: { kind: 'config', count: entries.length } }
  }
  const fromEnv = env['SBX_API_KEY']
  let key: string
  let source: KeySource
  if (fromEnv) {
    if (fromEnv.trim().length < 16)
      throw new AppError(
        'CONFIG_INVALID',
        'SBX_API_KEY is shorter than 16 characters; set a random key (e.g. openssl rand -hex 24)',
      )
    key = fromEnv
    source = { kind: 'env', variable: 'SBX_API_KEY', keyFile, keyFileIgnored: existsSync(keyFile) }
  } else if (existsSync(keyFile)) {
    key = readFileSync(keyFile, 'utf8').trim()
    if (!key)
      throw new AppError(
        'CONFIG_INVALID',
        `the API key file ${keyFile} is empty; delete it (a new key is generated) or set SBX_API_KEY`,
      )
    source = { kind: 'file', keyFile }
  } else {
    key = `sbx_${randomBytes(24).toString('base64url')}`
    mkdirSync(dirname(keyFile), { recursive: true })
    writeFileSync(keyFile, `${key}\n`, { mode: 0o600 })
    source = { kind: 'generated', keyFile }
  }
  return { entries: [{ key, tenant: 'default', admin: true }], secrets: [key], source }
}

/** The start-up banner's line about the API key: where it comes from and how to use it, never the key. */
export function describeKeySource(source: KeySource): string {
  switch (source.kind) {
    case 'config':
      return `API keys: ${source.count} from config \`apiKeys\` (the embedded default key is off)`
    case 'env':
      return (
        `API key (tenant "default", admin): from the environment variable ${source.variable}, not written to disk` +
        (source.keyFileIgnored ? ` (${source.keyFile} is ignored while it is set)` : '') +
        ` — curl -H "Authorization: Bearer $${source.variable}" …`
      )
    case 'file':
      return `API key (tenant "default", admin): read from ${source.keyFile} — curl -H "Authorization: Bearer $(cat ${source.keyFile})" …`
    case 'generated':
      return `API key (tenant "default", admin): generated and stored in ${source.keyFile} (mode 0600) — curl -H "Authorization: Bearer $(cat ${source.keyFile})" …`
    default:
      return assertNever(source)
  }
}
