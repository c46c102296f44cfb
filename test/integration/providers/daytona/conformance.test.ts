import { resolve } from 'node:path'
import { afterAll, beforeAll } from 'vitest'
import { createDaytonaProvider } from '../../../../providers/daytona/index.js'
import { runProviderConformance } from '../../../../src/sandbox/conformance/index.js'
import { resolveProfile } from '../../../../src/sandbox/profiles.js'
import { type FakeDaytona, startFakeDaytona } from '../../../fakes/daytona/index.js'

// The real SDK against the local fake (real containers behind it): see test/fakes/daytona.
let fake: FakeDaytona
beforeAll(async () => {
  fake = await startFakeDaytona()
})
afterAll(async () => {
  await fake?.close()
})

runProviderConformance('daytona', {
  createProvider: () =>
    createDaytonaProvider({
      apiKey: fake.apiKey,
      apiUrl: fake.apiUrl,
      instanceId: 'conformance-test',
      // Background processes: the agent binary scripts/setup.sh built, uploaded on first use.
      agentBinaryPath: resolve('.sbx/sbx-agent'),
    }),
  profile: resolveProfile('conformance', { provider: 'daytona', env: { SBX_PROFILE_VAR: 'from profile' } }),
  testTimeoutMs: 120_000,
})
