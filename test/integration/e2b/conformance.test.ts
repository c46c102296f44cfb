import { resolve } from 'node:path'
import { afterAll, expect } from 'vitest'
import { createE2BProvider } from '../../../providers/e2b/index.js'
import { runProviderConformance } from '../../../src/sandbox/conformance.js'
import { resolveProfile } from '../../../src/sandbox/profiles.js'
import { startFakeE2B } from '../../fakes/e2b/index.js'

// The real e2b SDK against the local fake (REST + envd over HTTP/1.1, sandboxes in Docker).
const fake = await startFakeE2B({ maxPageSize: 2 })

afterAll(async () => {
  await fake.close()
  expect(await fake.containers()).toEqual([])
}, 60_000)

runProviderConformance('e2b (fake)', {
  createProvider: () =>
    createE2BProvider({
      apiKey: fake.apiKey,
      apiUrl: fake.apiUrl,
      sandboxUrl: fake.sandboxUrl,
      instanceId: 'conformance-test',
      // Background processes: the agent binary scripts/setup.sh built, uploaded on first use.
      agentBinaryPath: resolve('.sbx/sbx-agent'),
    }),
  profile: resolveProfile('conformance', { provider: 'e2b', env: { SBX_PROFILE_VAR: 'from profile' } }),
  testTimeoutMs: 120_000,
})
