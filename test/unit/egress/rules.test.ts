import { describe, expect, test } from 'vitest'
import { compileEgress, decideEgress, EgressPolicySchema } from '../../../src/egress/policy.js'
import { parseEgressRule, ruleMatches } from '../../../src/egress/rules.js'

describe('egress rules', () => {
  test.each([
    ['api.example.com', 'api.example.com', 443, true],
    ['api.example.com', 'api.example.com', 80, true],
    ['api.example.com', 'api.example.com', 22, false],
    ['api.example.com', 'x.api.example.com', 443, false],
    ['*.example.org:443', 'a.b.example.org', 443, true],
    ['*.example.org:443', 'example.org', 443, false],
    ['*.example.org:443', 'a.example.org', 80, false],
    ['*.example.org:443', 'evilexample.org', 443, false],
    ['git.local:*', 'git.local', 2222, true],
    ['10.1.0.0/16', '10.1.200.3', 5432, true],
    ['10.1.0.0/16', '10.2.0.1', 5432, false],
    ['10.1.2.3:8080', '10.1.2.3', 8080, true],
    ['10.1.2.3:8080', '10.1.2.3', 8081, false],
    ['[fd00::/8]:443', 'fd00::1', 443, true],
    ['fd00::/8', 'fe80::1', 443, false],
    // a name rule never matches an address and an address rule never a name
    ['localhost:8080', '127.0.0.1', 8080, false],
    ['127.0.0.0/8', 'localhost', 80, false],
  ])('%s vs %s:%i → %s', (rule, host, port, expected) => {
    expect(ruleMatches(parseEgressRule(rule), host, port)).toBe(expected)
  })

  test.each([
    ['', 'is empty'],
    ['api.example.com:70000', "port '70000' is not 1-65535"],
    ['10.0.0.0/40', "prefix '/40' is out of range"],
    ['example.com/24', 'is not an IP address'],
    ['http://example.com', 'is a URL; write only the host'],
    ['exa mple.com', 'is not a host name'],
  ])('%j is refused: %s', (rule, message) => {
    expect(() => parseEgressRule(rule)).toThrow(message)
  })

  test('a bad rule in a profile names its index and the fix', () => {
    const r = EgressPolicySchema.safeParse({ allow: ['ok.example.com', 'not a host'] })
    expect(r.success).toBe(false)
    expect(r.error?.issues[0]?.path).toEqual(['allow', 1])
    expect(r.error?.issues[0]?.message).toContain("a host name ('api.example.com')")
  })

  test('a secret names exactly one source', () => {
    const r = EgressPolicySchema.safeParse({
      allow: ['a.test'],
      secrets: { T: { destinations: ['a.test'] } },
    })
    expect(r.error?.issues[0]?.message).toBe('give exactly one of env, file')
  })

  test('the tenant cap narrows and the verdict names the rule', () => {
    const policy = compileEgress(['*.example.com', 'db.internal:5432'], ['api.example.com'])
    expect(decideEgress(policy, 'api.example.com', 443)).toEqual({
      allowed: true,
      reason: "allowed by rule '*.example.com'",
    })
    expect(decideEgress(policy, 'www.example.com', 443).reason).toContain('outside the tenant')
    expect(decideEgress(policy, 'db.internal', 22).reason).toBe(
      "db.internal:22 matches no rule of the profile's network.allow (*.example.com, db.internal:5432)",
    )
  })
})
