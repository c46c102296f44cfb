import { describe, expect, test } from 'vitest'
import { AppError } from '../../../src/errors.js'
import { ProviderRegistry } from '../../../src/sandbox/registry.js'
import type { Sandbox, SandboxProvider } from '../../../src/sandbox/index.js'

/** A provider that records close() calls; its sandbox methods are never reached here. */
function stubProvider(id: string, onClose?: () => void): SandboxProvider {
  const unused = (): Promise<never> => Promise.reject(new Error('not used in registry tests'))
  return {
    id,
    create: unused as () => Promise<Sandbox>,
    connect: unused as () => Promise<Sandbox>,
    list: () => Promise.resolve([]),
    destroy: () => Promise.resolve(),
    close: async () => onClose?.(),
  }
}

function thrown(fn: () => unknown): AppError {
  try {
    fn()
  } catch (err) {
    expect(err).toBeInstanceOf(AppError)
    return err as AppError
  }
  throw new Error('expected a throw')
}

describe('ProviderRegistry providers', () => {
  test('get returns a registered provider', () => {
    const docker = stubProvider('docker')
    const registry = new ProviderRegistry().register(docker).register(stubProvider('e2b'))
    expect(registry.get('docker')).toBe(docker)
    expect(registry.has('e2b')).toBe(true)
    expect(registry.providerIds()).toEqual(['docker', 'e2b'])
  })

  test('an unknown provider is UNKNOWN_PROVIDER and lists the known ids', () => {
    const registry = new ProviderRegistry().register(stubProvider('e2b')).register(stubProvider('docker'))
    const err = thrown(() => registry.get('daytona'))
    expect(err.code).toBe('UNKNOWN_PROVIDER')
    expect(err.message).toContain("'daytona'")
    expect(err.message).toContain('known providers: docker, e2b')
  })

  test('registering the same id twice fails fast', () => {
    const registry = new ProviderRegistry().register(stubProvider('docker'))
    expect(thrown(() => registry.register(stubProvider('docker'))).code).toBe('CONFIG_INVALID')
  })

  test('close closes every provider', async () => {
    const closed: string[] = []
    const registry = new ProviderRegistry()
      .register(stubProvider('a', () => closed.push('a')))
      .register(stubProvider('b', () => closed.push('b')))
    await registry.close()
    expect(closed.sort()).toEqual(['a', 'b'])
  })
})

describe('ProviderRegistry profiles', () => {
  test('addProfile validates and fills defaults', () => {
    const registry = new ProviderRegistry()
    const p = registry.addProfile('small', { provider: 'docker', memoryMb: 128 })
    expect(p).toMatchObject({
      name: 'small',
      provider: 'docker',
      memoryMb: 128,
      network: 'none',
      cwd: '/workspace',
    })
    expect(registry.profile('small')).toBe(p)
  })

  test('an invalid profile is CONFIG_INVALID naming the profile and the field', () => {
    const registry = new ProviderRegistry()
    const err = thrown(() => registry.addProfile('bad', { provider: 'docker', memoryMb: 1 }))
    expect(err.code).toBe('CONFIG_INVALID')
    expect(err.message).toContain("'bad'")
    expect(err.message).toContain('memoryMb')
    const err2 = thrown(() =>
      registry.addProfile('bad2', { provider: 'docker', defaultTimeoutMs: 10, maxTimeoutMs: 5 }),
    )
    expect(err2.message).toContain('defaultTimeoutMs')
  })

  test('a duplicate profile name fails fast', () => {
    const registry = new ProviderRegistry().addProfiles({ a: { provider: 'docker' } })
    expect(thrown(() => registry.addProfile('a', { provider: 'docker' })).code).toBe('CONFIG_INVALID')
  })

  test('an unknown profile is UNKNOWN_PROFILE and lists the known names', () => {
    const registry = new ProviderRegistry().addProfiles({
      big: { provider: 'docker' },
      tiny: { provider: 'e2b' },
    })
    const err = thrown(() => registry.profile('huge'))
    expect(err.code).toBe('UNKNOWN_PROFILE')
    expect(err.message).toContain('known profiles: big, tiny')
    expect(registry.profileNames()).toEqual(['big', 'tiny'])
  })

  test('a profile of another provider does not resolve for this provider', () => {
    const registry = new ProviderRegistry()
      .register(stubProvider('docker'))
      .register(stubProvider('e2b'))
      .addProfiles({ local: { provider: 'docker' }, cloud: { provider: 'e2b' } })
    const err = thrown(() => registry.resolve('docker', 'cloud'))
    expect(err.code).toBe('UNKNOWN_PROFILE')
    expect(err.message).toContain("targets provider 'e2b'")
    expect(err.message).toContain("profiles for 'docker': local")
    const route = registry.resolve('docker', 'local')
    expect(route.provider.id).toBe('docker')
    expect(route.profile.name).toBe('local')
    expect(thrown(() => registry.resolve('daytona', 'local')).code).toBe('UNKNOWN_PROVIDER')
  })
})
