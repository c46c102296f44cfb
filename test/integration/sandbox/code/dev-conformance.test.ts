import { createDockerProvider } from '../../../../providers/docker/index.js'
import { runProviderConformance } from '../../../../src/sandbox/conformance/index.js'
import { DEV_IMAGE, resolveProfile } from '../../../../src/sandbox/profiles.js'

/* The provider conformance suite on the dev image, where the code-interpreter case runs for real. */
runProviderConformance('docker (dev image)', {
  createProvider: () => createDockerProvider({ instanceId: 'conformance-dev-test' }),
  profile: resolveProfile('conformance', {
    provider: 'docker',
    image: DEV_IMAGE,
    env: { SBX_PROFILE_VAR: 'from profile' },
  }),
})
