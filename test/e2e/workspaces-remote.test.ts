/*
 * Snapshots on the remote providers (the local Daytona fake, our own E2B endpoint): Daytona has no
 * snapshot-of-a-sandbox feature here, so `/v1/providers` says so and the calls are a clear 501
 * UNSUPPORTED; E2B snapshots whole sandboxes (e2b-provider-snapshots-fleet.test.ts). A profile
 * asking either for a persistent workspace is refused at start-up.
 */
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { startFakeDaytona } from '../fakes/daytona/index.js'
import type { FakeDaytona } from '../fakes/daytona/index.js'
import { type E2BEndpoint, startE2BEndpoint } from '../support/e2b-endpoint.js'
import { startLiveService } from '../support/live-service.js'
import type { LiveService } from '../support/live-service.js'
import { configDir, runSbx } from '../support/sbx-cli.js'

const KEY = 'remote-ws-key-0123456789abcdef'
const prefix = `e2ews${process.pid}${Date.now().toString(36)}`

let daytona: FakeDaytona
let e2b: E2BEndpoint
let live: LiveService
const env = () => ({
  DAYTONA_API_KEY: daytona.apiKey,
  DAYTONA_API_URL: daytona.apiUrl,
  E2B_API_KEY: e2b.apiKey,
  E2B_API_URL: e2b.apiUrl,
  E2B_SANDBOX_URL: e2b.sandboxUrl,
})

beforeAll(async () => {
  ;[daytona, e2b] = await Promise.all([startFakeDaytona(), startE2BEndpoint()])
  live = await startLiveService({
    prefix,
    keys: [{ key: KEY, tenant: 'acme' }],
    config: {
      profiles: {
        'remote-daytona': { provider: 'daytona', snapshot: 'sbx-test' },
        'remote-e2b': { provider: 'e2b', template: 'base' },
      },
    },
    env: env(),
  })
}, 120_000)

afterAll(async () => {
  await live?.close()
  await Promise.all([daytona?.close(), e2b?.close()])
}, 120_000)

function api(path: string, body?: unknown): Promise<Response> {
  return fetch(`${live.server.url}${path}`, {
    method: body === undefined ? 'GET' : 'POST',
    headers: { authorization: `Bearer ${KEY}`, 'content-type': 'application/json' },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  })
}

describe('snapshots on the remote providers', () => {
  test('/v1/providers says which providers support workspaces, snapshots and forks', async () => {
    const { providers } = (await (await api('/v1/providers')).json()) as {
      providers: { id: string; workspaces?: { persistent: boolean; snapshots: boolean; fork: boolean } }[]
    }
    const none = { persistent: false, snapshots: false, fork: false }
    expect(providers.find((p) => p.id === 'daytona')?.workspaces).toEqual(none)
    expect(providers.find((p) => p.id === 'e2b')?.workspaces).toEqual({
      persistent: false,
      snapshots: true,
      fork: true,
    })
  })

  test.each([['daytona', 'remote-daytona']])(
    '%s: snapshot and fork are 501 UNSUPPORTED, naming the provider',
    async (provider, profile) => {
      const id = `ws-${provider}`
      expect((await api('/v1/sessions', { id, provider, profile })).status).toBe(201)
      for (const path of [`/v1/sessions/${id}/snapshots`, `/v1/sessions/${id}/fork`]) {
        const res = await api(path, {})
        expect(res.status).toBe(501)
        const { error } = (await res.json()) as { error: { code: string; message: string } }
        expect(error.code).toBe('UNSUPPORTED')
        expect(error.message).toContain(`provider '${provider}' has no snapshots`)
      }
    },
  )

  test('a persistent workspace on a remote provider is refused at start-up', async () => {
    const cwd = configDir({
      queue: { prefix: `${prefix}x` },
      profiles: { bad: { provider: 'e2b', template: 'base', workspace: { persistent: true } } },
    })
    const r = await runSbx(['serve', '--port', '0'], { cwd, env: env(), timeoutMs: 60_000 })
    expect(r.code).not.toBe(0)
    expect(r.stderr).toContain("profile 'bad' asks for a persistent workspace")
  }, 90_000)
})
