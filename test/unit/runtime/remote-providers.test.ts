import { describe, expect, test } from 'vitest'
import { ConfigSchema } from '../../../src/config/schema.js'
import { AppError } from '../../../src/errors.js'
import { createRemoteProviders } from '../../../src/runtime/remote-providers.js'

const providersOf = (input: unknown) => ConfigSchema.parse({ providers: input }).providers

describe('remote providers from config and env', () => {
  test('off by default: no key variable, no section', async () => {
    expect(createRemoteProviders(providersOf({}), {})).toEqual([])
  })

  test('a key variable turns a provider on; URLs come from config first, then env', async () => {
    const ps = createRemoteProviders(providersOf({ e2b: { apiUrl: 'http://127.0.0.1:9/api' } }), {
      DAYTONA_API_KEY: 'dtn_secret',
      DAYTONA_API_URL: 'http://127.0.0.1:9/daytona',
      E2B_API_KEY: 'e2b_0123456789abcdef',
      E2B_API_URL: 'http://ignored.invalid',
    })
    expect(ps.map((p) => p.id)).toEqual(['daytona', 'e2b'])
    await Promise.all(ps.map((p) => p.close?.()))
  })

  test('enabled: false wins over a key in the environment', () => {
    const ps = createRemoteProviders(providersOf({ daytona: { enabled: false } }), { DAYTONA_API_KEY: 'k' })
    expect(ps).toEqual([])
  })

  test('enabled without its key: CONFIG_INVALID naming the variable, never a key value', () => {
    const run = () =>
      createRemoteProviders(providersOf({ e2b: { enabled: true, apiKeyEnv: 'TEAM_E2B_KEY' } }), {
        E2B_API_KEY: 'e2b_deadbeef',
      })
    expect(run).toThrow(AppError)
    expect(run).toThrow(/TEAM_E2B_KEY is not set/)
    try {
      run()
    } catch (err) {
      expect((err as AppError).code).toBe('CONFIG_INVALID')
      expect((err as Error).message).not.toContain('deadbeef')
    }
  })

  test('unknown keys in a provider section are rejected', () => {
    expect(() => providersOf({ daytona: { apiKey: 'inline' } })).toThrow(/apiKey/)
  })
})
