import { randomBytes } from 'node:crypto'
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs'
import { dirname } from 'node:path'
import type { Config } from '../config/schema.js'
import { AppError } from '../errors.js'
import type { KeyEntry } from '../http/keyring.js'

/** The keyring entries of a config, plus the plain keys (for log redaction only). */
export interface ResolvedKeys {
  entries: KeyEntry[]
  /** Plain keys known to this process: masked in every log line. */
  secrets: string[]
  /** Set when the embedded default key was used or generated: where it is stored. */
  embeddedKeyFile?: string
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
    return { entries, secrets }
  }
  let key = env['SBX_API_KEY']
  if (!key) {
    if (existsSync(keyFile)) key = readFileSync(keyFile, 'utf8').trim()
    else {
      key = `sbx_${randomBytes(24).toString('base64url')}`
      mkdirSync(dirname(keyFile), { recursive: true })
      writeFileSync(keyFile, `${key}\n`, { mode: 0o600 })
    }
  }
  return { entries: [{ key, tenant: 'default', admin: true }], secrets: [key], embeddedKeyFile: keyFile }
}
