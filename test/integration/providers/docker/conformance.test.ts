import { createDockerProvider } from '../../../../providers/docker/index.js'
import { runProviderConformance } from '../../../../src/sandbox/conformance/index.js'
import { resolveProfile } from '../../../../src/sandbox/profiles.js'

runProviderConformance('docker', {
  createProvider: () => createDockerProvider({ instanceId: 'conformance-test' }),
  profile: resolveProfile('conformance', { provider: 'docker', env: { SBX_PROFILE_VAR: 'from profile' } }),
})
