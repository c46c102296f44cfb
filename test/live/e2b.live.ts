/**
 * The provider conformance suite against the real E2B cloud (`npm run test:live`). Needs
 * E2B_API_KEY; E2B_DOMAIN / E2B_API_URL are honoured by the SDK, E2B_TEMPLATE picks the template
 * (default `base`). Without a key this file fails with a message saying so: it never skips.
 */
import { randomUUID } from 'node:crypto'
import { E2B } from 'e2b'
import { describe, expect, test } from 'vitest'
import { createE2BProvider } from '../../providers/e2b/index.js'
import { runProviderConformance } from '../../src/sandbox/conformance/index.js'
import { resolveProfile } from '../../src/sandbox/profiles.js'
import { LABELS } from '../../src/sandbox/types.js'

const apiKey = process.env.E2B_API_KEY
const template = process.env.E2B_TEMPLATE || 'base'
const T = 180_000

if (!apiKey) {
  test('E2B_API_KEY is set', () => {
    throw new Error(
      'E2B_API_KEY is not set: the live E2B suite runs against the real E2B cloud and needs an API key ' +
        '(export E2B_API_KEY=e2b_...). `npm test` runs the same suite against the local fake.',
    )
  })
} else {
  const profile = resolveProfile('live', {
    provider: 'e2b',
    template,
    env: { SBX_PROFILE_VAR: 'from profile' },
    idleTtlMs: 600_000,
  })
  const createProvider = () => createE2BProvider({ apiKey, instanceId: 'live-test' })

  runProviderConformance('e2b (live)', { createProvider, profile, testTimeoutMs: T })

  describe('e2b (live) lifetime and metadata', () => {
    test(
      'a sandbox carries its labels as metadata and a kill-on-timeout lifetime of idle TTL + slack',
      async () => {
        const provider = createProvider()
        const labels = { 'sandbox-router.live-run': randomUUID() }
        const sb = await provider.create(profile, { labels })
        try {
          const info = await new E2B({ apiKey }).Sandbox.getInfo(sb.ref.id)
          expect(info.metadata).toMatchObject({ ...labels, [LABELS.owner]: 'sandbox-router' })
          expect(info.lifecycle?.onTimeout).toBe('kill')
          const lifetimeMs = info.endAt.getTime() - info.startedAt.getTime()
          // 600 s idle TTL + 60 s slack, give or take the create latency.
          expect(lifetimeMs).toBeGreaterThan(600_000)
          expect(lifetimeMs).toBeLessThan(700_000)
          expect((await provider.list({ labels })).map((r) => r.id)).toEqual([sb.ref.id])
        } finally {
          await provider.destroy(sb.ref)
          await provider.close()
        }
      },
      T,
    )
  })
}
