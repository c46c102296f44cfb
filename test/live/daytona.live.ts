/**
 * The provider conformance suite against the real Daytona cloud (run by `npm run test:live`).
 * Needs DAYTONA_API_KEY; DAYTONA_API_URL (self-hosted or another region's API) and DAYTONA_TARGET
 * are optional. Without a key the file fails on purpose instead of skipping.
 */
import { randomUUID } from 'node:crypto'
import { describe, expect, test } from 'vitest'
import { createDaytonaProvider } from '../../providers/daytona/index.js'
import { runProviderConformance } from '../../src/sandbox/conformance/index.js'
import { resolveProfile } from '../../src/sandbox/profiles.js'
import { LABELS } from '../../src/sandbox/types.js'

const apiKey = process.env.DAYTONA_API_KEY
const TIMEOUT = 180_000

// /tmp is writable by the sandbox user of any Daytona image; the suite's files go below it.
const profile = resolveProfile('live-conformance', {
  provider: 'daytona',
  cwd: '/tmp/sbx-live',
  env: { SBX_PROFILE_VAR: 'from profile' },
  idleTtlMs: 10 * 60_000,
})

if (!apiKey) {
  test('the live Daytona suite needs DAYTONA_API_KEY', () => {
    throw new Error(
      'DAYTONA_API_KEY is not set: export a Daytona API key (and DAYTONA_API_URL for a non-default API) ' +
        'to run test/live/daytona.live.ts; the live suite fails rather than skips without it',
    )
  })
} else {
  const createProvider = () =>
    createDaytonaProvider({
      apiKey,
      ...(process.env.DAYTONA_API_URL ? { apiUrl: process.env.DAYTONA_API_URL } : {}),
      ...(process.env.DAYTONA_TARGET ? { target: process.env.DAYTONA_TARGET } : {}),
      instanceId: 'live-conformance',
    })

  runProviderConformance('daytona (live)', { createProvider, profile, testTimeoutMs: TIMEOUT })

  describe('daytona (live): what the cloud stores', () => {
    test(
      'labels and the server-side lifetime reach the real API',
      async () => {
        const provider = createProvider()
        const labels = { [LABELS.tenant]: 'live-tenant', [LABELS.session]: randomUUID() }
        const sb = await provider.create(profile, { labels })
        try {
          const remote = await provider.daytona.get(sb.ref.id)
          expect(remote.labels).toMatchObject({ ...labels, [LABELS.owner]: 'sandbox-router' })
          expect(remote.autoStopInterval).toBe(10)
          expect(remote.autoDeleteInterval).toBe(0)
          expect((await provider.list({ labels })).map((r) => r.id)).toEqual([sb.ref.id])
        } finally {
          await provider.destroy(sb.ref)
          await provider.close()
        }
      },
      TIMEOUT,
    )
  })
}
