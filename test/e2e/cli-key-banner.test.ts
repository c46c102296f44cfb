import { existsSync, mkdirSync, readFileSync, statSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { afterAll, describe, expect, test } from 'vitest'
import { configDir, fleetConfig, startSbxServer, uniqueName, removeScope } from '../support/sbx-cli.js'
import type { SbxServer } from '../support/sbx-cli.js'

/**
 * F13: the start-up banner of `sbx serve` / `sbx api` says where the API key really comes from
 * (environment, key file, generated), and never prints the key.
 */
const started: SbxServer[] = []
const scopes: string[] = []
afterAll(async () => {
  for (const s of started.reverse()) await s.stop()
  for (const scope of scopes) await removeScope(scope)
}, 60_000)

/** The banner's API key line (printed right after `listening on`). */
const banner = async (srv: SbxServer): Promise<string> =>
  (await srv.child.next((l) => l.stream === 'stderr' && /API key/.test(l.text), 30_000)).text
const everything = (srv: SbxServer): string => srv.child.lines.map((l) => l.text).join('\n')

/** Status of an authenticated request with `key`. */
const statusWith = async (srv: SbxServer, key: string): Promise<number> =>
  (await srv.fetch('/v1/providers', { key })).status

describe('the API key line of the start-up banner', () => {
  test('sbx api with SBX_API_KEY: "from the environment", nothing written, a stale key file named as ignored', async () => {
    const prefix = uniqueName('keyenv')
    scopes.push(prefix)
    const cwd = configDir(fleetConfig(prefix))
    // A key file from an earlier run holding another key.
    mkdirSync(join(cwd, '.sbx'))
    writeFileSync(join(cwd, '.sbx', 'api-key'), 'sbx_old_key_from_an_earlier_run_0123456789\n', {
      mode: 0o600,
    })
    const key = `sbx_env_${uniqueName('k').replace(/-/g, '')}`
    const srv = await startSbxServer('api', { config: fleetConfig(prefix), cwd, env: { SBX_API_KEY: key } })
    started.push(srv)
    const line = await banner(srv)
    expect(line).toContain('from the environment variable SBX_API_KEY, not written to disk')
    expect(line).toContain(`${join(cwd, '.sbx', 'api-key')} is ignored while it is set`)
    expect(line).not.toMatch(/stored in/)
    expect(everything(srv)).not.toContain(key)
    // The file still holds the old key, which does not open the API; the environment's key does.
    expect(readFileSync(join(cwd, '.sbx', 'api-key'), 'utf8')).toContain('sbx_old_key')
    expect(await statusWith(srv, 'sbx_old_key_from_an_earlier_run_0123456789')).toBe(401)
    expect(await statusWith(srv, key)).toBe(200)
  })

  test('sbx serve without SBX_API_KEY: "generated and stored in", then "read from" on the next start', async () => {
    const prefix = uniqueName('keygen')
    scopes.push(prefix)
    const config = { queue: { prefix } }
    const cwd = configDir(config)
    const keyFile = join(cwd, '.sbx', 'api-key')
    // An empty SBX_API_KEY counts as unset (the fixture would otherwise pass one).
    const first = await startSbxServer('serve', { config, cwd, env: { SBX_API_KEY: '' } })
    started.push(first)
    expect(await banner(first)).toContain(`generated and stored in ${keyFile} (mode 0600)`)
    expect(existsSync(keyFile)).toBe(true)
    expect(statSync(keyFile).mode & 0o777).toBe(0o600)
    const key = readFileSync(keyFile, 'utf8').trim()
    expect(everything(first)).not.toContain(key)
    expect(await statusWith(first, key)).toBe(200)
    await first.stop()
    started.pop()

    const second = await startSbxServer('serve', { config, cwd, env: { SBX_API_KEY: '' } })
    started.push(second)
    expect(await banner(second)).toContain(`read from ${keyFile}`)
    expect(everything(second)).not.toContain(key)
    expect(await statusWith(second, key)).toBe(200)
  })
})
