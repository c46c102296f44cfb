import { randomUUID } from 'node:crypto'
import { type E2BProvider, type E2BProviderOptions, createE2BProvider } from '../../providers/e2b/index.js'
import { type ProfileInput, resolveProfile } from '../../src/sandbox/profiles.js'
import type { Labels, Sandbox } from '../../src/sandbox/types.js'
import type { E2BEndpoint } from './e2b-endpoint.js'
import { TEST_RUN_LABEL } from './provider-fixture.js'

export { quick, rejectionOf, TEST_RUN_LABEL } from './provider-fixture.js'

/** A provider on `endpoint` (test/support/e2b-endpoint.ts) plus a unique label, and a cleanup that destroys what carries it. */
export function e2bFixture(
  endpoint: Pick<E2BEndpoint, 'apiKey' | 'apiUrl' | 'sandboxUrl'>,
  options: Partial<E2BProviderOptions> = {},
): {
  provider: E2BProvider
  labels: Labels
  create: (profile?: Omit<ProfileInput, 'provider'>) => Promise<Sandbox>
  cleanup: () => Promise<number>
} {
  const provider = createE2BProvider({
    apiKey: endpoint.apiKey,
    apiUrl: endpoint.apiUrl,
    sandboxUrl: endpoint.sandboxUrl,
    instanceId: 'e2b-integration-test',
    ...options,
  })
  const labels = { [TEST_RUN_LABEL]: randomUUID() }
  return {
    provider,
    labels,
    create: (profile = {}) =>
      provider.create(resolveProfile('test', { provider: 'e2b', ...profile }), { labels }),
    cleanup: async () => {
      await Promise.all((await provider.list({ labels })).map((ref) => provider.destroy(ref)))
      await provider.close()
      return (await provider.list({ labels })).length
    },
  }
}
