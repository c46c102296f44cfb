import { describe, expect, test } from 'vitest'
import {
  buildContainerSpec,
  RUNSC_HOST_TASKS_PER_PROCESS,
} from '../../../../providers/docker/container-spec.js'
import { DockerProviderOptionsSchema } from '../../../../providers/docker/options.js'
import { missingRuntimeError } from '../../../../providers/docker/runtimes.js'
import { ProfileSchema, resolveProfile } from '../../../../src/sandbox/profiles.js'

const opts = DockerProviderOptionsSchema.parse({})
const spec = (input: Parameters<typeof resolveProfile>[1]) =>
  buildContainerSpec(resolveProfile('p', input), 'img', {}, opts).HostConfig

describe('profile runtime in the container spec', () => {
  test('runc: the engine runtime runc, the pids limit as written, no nproc rlimit', () => {
    const h = spec({ provider: 'docker', pidsLimit: 100 })
    expect(h).toMatchObject({ Runtime: 'runc', PidsLimit: 100 })
    expect(h?.Ulimits).toBeUndefined()
  })

  test('runsc: host pids scaled for the sentry, nproc holds the profile limit inside', () => {
    const h = spec({ provider: 'docker', runtime: 'runsc', pidsLimit: 100 })
    expect(h).toMatchObject({ Runtime: 'runsc', PidsLimit: 100 * RUNSC_HOST_TASKS_PER_PROCESS })
    expect(h?.Ulimits).toEqual([{ Name: 'nproc', Soft: 100, Hard: 100 }])
  })

  test('runsc with network bridge is refused, saying what to change', () => {
    const r = ProfileSchema.safeParse({ provider: 'docker', runtime: 'runsc', network: 'bridge' })
    expect(r.success).toBe(false)
    expect(r.error?.issues[0]?.message).toMatch(
      /takes network 'none' or an egress allowlist only.*drop network: bridge/,
    )
  })

  test('a missing runtime names it, what the engine has, and the setup script', () => {
    const err = missingRuntimeError('untrusted', 'runsc', ['runc'])
    expect(err.code).toBe('CONFIG_INVALID')
    expect(err.message).toMatch(
      /profile 'untrusted' asks for runtime 'runsc'.*\(it has: runc\).*scripts\/setup-gvisor\.sh/,
    )
  })
})
