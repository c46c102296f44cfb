import { createDockerProvider } from '../../../../providers/docker/index.js'
import { runProviderConformance } from '../../../../src/sandbox/conformance/index.js'
import { resolveProfile } from '../../../../src/sandbox/profiles.js'
import { plainImage } from '../../../support/plain-images.js'

// Images made here without the agent: the provider brings its own (the agent volume).
for (const kind of ['busybox', 'debian'] as const) {
  const image = plainImage(kind)
  runProviderConformance(`docker, ${image}`, {
    createProvider: () => createDockerProvider({ instanceId: 'any-image-conformance-test' }),
    profile: resolveProfile('conformance', {
      provider: 'docker',
      image,
      env: { SBX_PROFILE_VAR: 'from profile' },
    }),
  })
}
