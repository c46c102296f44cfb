import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import type { LineChild } from '../support/redis-child.js'
import {
  configDir,
  fleetConfig,
  removeScope,
  runSbx,
  startSbxServer,
  startSbxWorker,
  uniqueName,
} from '../support/sbx-cli.js'
import type { SbxServer } from '../support/sbx-cli.js'

/**
 * `sbx worker --metrics-port`: in a fleet the exec latency lives in the workers, which serve no HTTP
 * API; the flag serves the worker's GET /metrics with the API's keys. Started as a user would
 * (`sbx api` + `sbx worker --metrics-port 0`), read over HTTP.
 */
const scope = uniqueName('wmetrics')
const ADMIN = `sbx_admin_${scope.replace(/-/g, '')}`
const ACME = `sbx_acme_${scope.replace(/-/g, '')}`
const config = fleetConfig(scope, {
  apiKeys: [
    { key: ADMIN, tenant: 'default', admin: true },
    { key: ACME, tenant: 'acme' },
  ],
})
let api: SbxServer
let worker: LineChild
let metricsUrl = ''

beforeAll(async () => {
  const cwd = configDir(config)
  api = await startSbxServer('api', { config, cwd, env: { SBX_API_KEY: ADMIN } })
  worker = await startSbxWorker({ config, cwd, args: ['--metrics-port', '0'] })
  const line = await worker.next((l) => /metrics at http/.test(l.text), 30_000)
  metricsUrl = /metrics at (http:\/\/\S+\/metrics)/.exec(line.text)?.[1] ?? ''
}, 180_000)

afterAll(async () => {
  await worker?.stop()
  await api?.stop()
  await removeScope(scope)
}, 120_000)

const scrape = (key?: string) => fetch(metricsUrl, key ? { headers: { authorization: `Bearer ${key}` } } : {})

describe('sbx worker --metrics-port', () => {
  test('the worker serves its own series: the exec latency of the command it ran', async () => {
    expect(metricsUrl).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/metrics$/)
    expect(worker.lines.some((l) => /metrics at .* API keys: 2 from config/.test(l.text))).toBe(true)
    const r = await api.post(
      '/v1/exec',
      { provider: 'docker', profile: 'default', command: 'echo hi' },
      { key: ACME },
    )
    expect(((await r.json()) as { state: string }).state).toBe('completed')
    const res = await scrape(ADMIN)
    expect(res.status).toBe(200)
    expect(res.headers.get('content-type')).toContain('text/plain')
    const text = await res.text()
    expect(text).toMatch(
      /^sbx_exec_duration_seconds_count\{[^}]*provider="docker"[^}]*outcome="completed"[^}]*\} 1$/m,
    )
  })

  test('a key is required, unknown keys are refused, and other paths are 404', async () => {
    const none = await scrape()
    expect(none.status).toBe(401)
    expect(await none.text()).toMatch(/missing bearer token/)
    const wrong = await scrape('sbx_not_a_key_0123456789')
    expect(wrong.status).toBe(401)
    expect(await wrong.text()).toMatch(/unknown API key/)
    // A tenant key reads only its tenant's series (as the API's /metrics).
    expect((await scrape(ACME)).status).toBe(200)
    const other = await fetch(metricsUrl.replace(/\/metrics$/, '/v1/exec'))
    expect(other.status).toBe(404)
    expect(await other.text()).toMatch(/only GET \/metrics/)
  })

  test('bad flags are usage errors that say what to pass', async () => {
    const cwd = configDir(config)
    const bad = await runSbx(['worker', '--metrics-port', 'nine'], { cwd, timeoutMs: 30_000 })
    expect(bad.code).not.toBe(0)
    expect(bad.stderr).toMatch(/--metrics-port must be a TCP port/)
    const hostOnly = await runSbx(['worker', '--metrics-host', '0.0.0.0'], { cwd, timeoutMs: 30_000 })
    expect(hostOnly.code).not.toBe(0)
    expect(hostOnly.stderr).toMatch(/--metrics-host needs --metrics-port/)
  })
})
