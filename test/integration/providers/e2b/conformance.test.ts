import { resolve } from 'node:path'
import { afterAll, expect } from 'vitest'
import { createE2BProvider } from '../../../../providers/e2b/index.js'
import { runProviderConformance } from '../../../../src/sandbox/conformance/index.js'
import { resolveProfile } from '../../../../src/sandbox/profiles.js'
import { startE2BEndpoint } from '../../../support/e2b-endpoint.js'

// The real e2b SDK against our E2B-compatible endpoint (`sbx serve`, sandboxes in Docker), listing
// in pages of two.
const endpoint = await startE2BEndpoint({ maxPageSize: 2 })

afterAll(async () => {
  expect(await endpoint.close()).toBe(0)
}, 60_000)

runProviderConformance('e2b (our endpoint on Docker)', {
  createProvider: () =>
    createE2BProvider({
      apiKey: endpoint.apiKey,
      apiUrl: endpoint.apiUrl,
      sandboxUrl: endpoint.sandboxUrl,
      instanceId: 'conformance-test',
      // Background processes: the agent binary scripts/setup.sh built, uploaded on first use.
      agentBinaryPath: resolve('.sbx/sbx-agent'),
    }),
  profile: resolveProfile('conformance', { provider: 'e2b', env: { SBX_PROFILE_VAR: 'from profile' } }),
  testTimeoutMs: 120_000,
})
