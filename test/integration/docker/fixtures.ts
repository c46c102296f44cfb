import { randomUUID } from 'node:crypto'
import { type DockerProvider, createDockerProvider } from '../../../providers/docker/index.js'
import { type ProfileInput, resolveProfile } from '../../../src/sandbox/profiles.js'
import type { ExecRequest, Labels, Sandbox } from '../../../src/sandbox/types.js'

/** Label that scopes one test file's sandboxes; `cleanup` destroys everything carrying it. */
export const TEST_RUN_LABEL = 'sandbox-router.test-run'

/** A provider plus a unique label for one test file, and a cleanup that leaves zero containers. */
export function dockerFixture(): {
  provider: DockerProvider
  labels: Labels
  create: (profile?: Omit<ProfileInput, 'provider'>) => Promise<Sandbox>
  cleanup: () => Promise<number>
} {
  const provider = createDockerProvider({ instanceId: 'docker-integration-test' })
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

/** Defaults for quick commands. */
export const quick: Pick<ExecRequest, 'timeoutMs' | 'outputCapBytes'> = {
  timeoutMs: 20_000,
  outputCapBytes: 1 << 20,
}

/** The error a promise rejects with (fails when it resolves). */
export async function rejectionOf(promise: Promise<unknown>): Promise<unknown> {
  try {
    await promise
  } catch (err) {
    return err
  }
  throw new Error('expected the promise to reject')
}
