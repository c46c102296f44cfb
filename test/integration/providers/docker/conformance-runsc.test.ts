import { createDockerProvider } from '../../../../providers/docker/index.js'
import { runProviderConformance } from '../../../../src/sandbox/conformance/index.js'
import { resolveProfile } from '../../../../src/sandbox/profiles.js'

// The same suite under gVisor (the engine runtime scripts/setup-gvisor.sh registers).
runProviderConformance('docker (runsc)', {
  createProvider: () => createDockerProvider({ instanceId: 'conformance-runsc-test' }),
  profile: resolveProfile('conformance-runsc', {
    provider: 'docker',
    runtime: 'runsc',
    env: { SBX_PROFILE_VAR: 'from profile' },
  }),
})
