import { describe, expect, test } from 'vitest'
import { EgressPolicySchema } from '../../../src/egress/policy.js'
import { assertEgressEnforceable, egressSupport } from '../../../src/egress/providers.js'
import { EgressUnenforceableError, daytonaNetwork, e2bNetwork } from '../../../src/egress/remote.js'
import { parseEgressRule, ruleCovers } from '../../../src/egress/rules.js'

const policy = (allow: string[]) => EgressPolicySchema.parse({ allow })

describe('daytonaNetwork', () => {
  test('none, bridge and an address allowlist (normalised to network addresses)', () => {
    expect(daytonaNetwork('none')).toEqual({ networkBlockAll: true })
    expect(daytonaNetwork('bridge')).toEqual({ networkBlockAll: false })
    expect(daytonaNetwork(policy(['10.1.2.3/16', '192.168.7.9', '0.0.0.0/0']))).toEqual({
      networkBlockAll: false,
      networkAllowList: '10.1.0.0/16,192.168.7.9/32,0.0.0.0/0',
    })
  })
  test.each([['api.example.com'], ['*.example.com'], ['fd00::/8'], ['10.0.0.0/8:443']])(
    'refuses %s',
    (rule) => expect(() => daytonaNetwork(policy([rule]))).toThrow(EgressUnenforceableError),
  )
})

describe('e2bNetwork', () => {
  test('none, bridge and rules (names, wildcards, addresses)', () => {
    expect(e2bNetwork('none')).toEqual({ allowInternetAccess: false })
    expect(e2bNetwork('bridge')).toEqual({ allowInternetAccess: true })
    expect(e2bNetwork(policy(['API.example.com', '*.pkg.example.org', '10.9.8.7/8', 'fd00::/8']))).toEqual({
      allowInternetAccess: false,
      allowOut: ['api.example.com', '*.pkg.example.org', '10.0.0.0/8', 'fd00::/8'],
      denyOut: ['0.0.0.0/0'],
    })
  })
  test.each([['api.example.com:443'], ['git.example.com:*'], ['10.0.0.0/8:22']])('refuses %s', (rule) =>
    expect(() => e2bNetwork(policy([rule]))).toThrow(EgressUnenforceableError),
  )
})

test('tlsIntercept is refused on both remote providers (it needs the service proxy)', () => {
  const p = EgressPolicySchema.parse({ allow: ['10.0.0.0/8'], tlsIntercept: true })
  expect(() => daytonaNetwork(p)).toThrow('tlsIntercept needs the service')
  expect(() => e2bNetwork(p)).toThrow('tlsIntercept needs the service')
})

describe('ruleCovers (a cap rule holding a profile rule)', () => {
  const covers = (outer: string, inner: string) => ruleCovers(parseEgressRule(outer), parseEgressRule(inner))
  test.each([
    ['10.0.0.0/8', '10.1.0.0/16', true],
    ['10.0.0.0/8', '10.1.2.3', true],
    ['10.1.0.0/16', '10.0.0.0/8', false],
    ['10.0.0.0/8', '11.0.0.0/16', false],
    ['10.0.0.0/8:443', '10.1.0.0/16', false],
    ['10.0.0.0/8', '10.1.0.0/16:443', true],
    ['*.example.com', 'api.example.com', true],
    ['*.example.com', '*.a.example.com', true],
    ['*.example.com', '*.example.com', true],
    ['*.example.com', 'example.com', false],
    ['api.example.com', '*.api.example.com', false],
    ['api.example.com:*', 'api.example.com', true],
    ['api.example.com', 'api.example.com:22', false],
    ['10.0.0.0/8', 'api.example.com', false],
  ])('%s covers %s: %s', (outer, inner, expected) => expect(covers(outer, inner)).toBe(expected))
})

describe('assertEgressEnforceable and egressSupport', () => {
  test('docker takes everything; a remote rule must lie inside every tenant cap', () => {
    expect(() =>
      assertEgressEnforceable('p', 'docker', policy(['x.example.com']), { t: ['10.0.0.0/8'] }),
    ).not.toThrow()
    expect(() =>
      assertEgressEnforceable('p', 'e2b', policy(['10.1.0.0/16']), { t: ['10.0.0.0/8'] }),
    ).not.toThrow()
    expect(() => assertEgressEnforceable('p', 'e2b', policy(['11.0.0.0/16']), { t: ['10.0.0.0/8'] })).toThrow(
      "rule '11.0.0.0/16' is not inside tenant 't''s egress cap (10.0.0.0/8)",
    )
    expect(() => assertEgressEnforceable('p', 'other', policy(['10.0.0.0/8']))).toThrow(
      "provider 'other' has no egress allowlist",
    )
  })
  test('per provider: enforced and refused parts', () => {
    expect(egressSupport('docker').refuses).toEqual([])
    expect(egressSupport('daytona').refuses).toContain('hosts')
    expect(egressSupport('e2b').enforces).toContain('wildcards')
  })
})
