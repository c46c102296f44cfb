import { randomUUID } from 'node:crypto'
import {
  type DockerProvider,
  type DockerProviderOptions,
  createDockerProvider,
} from '../../providers/docker/index.js'
import { type ProfileInput, resolveProfile } from '../../src/sandbox/profiles.js'
import type { Labels, Sandbox } from '../../src/sandbox/types.js'
import { TEST_RUN_LABEL } from './provider-fixture.js'

export { quick, rejectionOf, TEST_RUN_LABEL } from './provider-fixture.js'

/** A provider plus a unique label for one test file, and a cleanup that leaves zero containers. */
export function dockerFixture(options: Omit<DockerProviderOptions, 'instanceId'> = {}): {
  provider: DockerProvider
  labels: Labels
  create: (profile?: Omit<ProfileInput, 'provider'>) => Promise<Sandbox>
  cleanup: () => Promise<number>
} {
  const provider = createDockerProvider({ ...options, instanceId: 'docker-integration-test' })
  const labels = { [TEST_RUN_LABEL]: randomUUID() }
  return {
    provider,
    labels,
    create: (profile = {}) =>
      provider.create(resolveProfile('test', { provider: 'docker', ...profile }), { labels }),
    cleanup: async () => {
      const refs = await provider.list({ labels })
      await Promise.all(refs.map((ref) => provider.destroy(ref)))
      await provider.close()
      return (await provider.list({ labels })).length
    },
  }
}
