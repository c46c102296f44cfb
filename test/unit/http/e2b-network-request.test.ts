import { describe, expect, test } from 'vitest'
import { needsNoNetwork, networkRequestOf } from '../../../src/http/e2b/network-request.js'

const names = { template: 'base', profile: 'p' }
const decide = (body: Record<string, unknown>, network: 'none' | 'bridge' | 'allowlist') =>
  needsNoNetwork(
    networkRequestOf(body, body['network'] as Record<string, unknown> | undefined),
    network,
    names,
  )

describe("an E2B create's network rules against the profile", () => {
  test('no rules: the profile as it is', () => {
    for (const n of ['none', 'bridge', 'allowlist'] as const) expect(decide({}, n)).toBe(false)
  })
  test('no internet is applied on a profile with a network, and is a no-op on one without', () => {
    expect(decide({ allow_internet_access: false }, 'bridge')).toBe(true)
    expect(decide({ allow_internet_access: false }, 'allowlist')).toBe(true)
    expect(decide({ network: { denyOut: ['0.0.0.0/0'] } }, 'allowlist')).toBe(true)
    expect(decide({ allow_internet_access: false }, 'none')).toBe(false)
    expect(decide({ network: { denyOut: ['10.0.0.0/8'] } }, 'none')).toBe(false)
  })
  test('on a profile without network every rule is accepted: the sandbox gets less than asked, never more', () => {
    expect(decide({ allow_internet_access: true }, 'none')).toBe(false)
    expect(decide({ network: { allowOut: ['a.example'], denyOut: ['0.0.0.0/0'] } }, 'none')).toBe(false)
  })
  test('per-sandbox lists on a profile with a network are a 400 naming the fix', () => {
    expect(decide({ allow_internet_access: true }, 'bridge')).toBe(false)
    expect(() =>
      decide({ network: { allowOut: ['a.example'], denyOut: ['0.0.0.0/0'] } }, 'allowlist'),
    ).toThrow(
      /network.allowOut is not supported here: template 'base' runs on profile 'p' \(network: allowlist\).*network.allow/,
    )
    expect(() => decide({ network: { denyOut: ['10.0.0.0/8'] } }, 'bridge')).toThrow(
      /network.denyOut \["10.0.0.0\/8"\] is not supported here/,
    )
  })
  test('a wrong shape is a 400', () => {
    expect(() => decide({ allow_internet_access: 'yes' }, 'none')).toThrow(
      /allow_internet_access must be a boolean/,
    )
    expect(() => decide({ network: { allowOut: 'a.example' } }, 'none')).toThrow(
      /network.allowOut must be a list/,
    )
  })
})
