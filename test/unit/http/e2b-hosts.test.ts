import { describe, expect, test } from 'vitest'
import { parseSandboxHost, sandboxDomain } from '../../../src/http/e2b/hosts.js'

const ID = 'e2b-0123456789abcdef0123'

describe('E2B sandbox host names', () => {
  test('the default domain is localhost with the port the request came to', () => {
    expect(sandboxDomain(undefined, '127.0.0.1:8080')).toBe('localhost:8080')
    expect(sandboxDomain(undefined, 'api.example.com')).toBe('localhost')
    expect(sandboxDomain('e2b.example.com', '127.0.0.1:8080')).toBe('e2b.example.com')
  })

  test('<port>-<id>.<domain> names a port of a sandbox; other names are the API', () => {
    expect(parseSandboxHost(`8000-${ID}.localhost:8080`, undefined)).toEqual({ port: 8000, sandboxId: ID })
    expect(parseSandboxHost(`8000-${ID.toUpperCase()}.LOCALHOST`, undefined)).toEqual({
      port: 8000,
      sandboxId: ID,
    })
    expect(parseSandboxHost(`8000-${ID}.example.com:8080`, undefined)).toBeUndefined()
    expect(parseSandboxHost(`8000-${ID}.e2b.example.com`, 'e2b.example.com')).toEqual({
      port: 8000,
      sandboxId: ID,
    })
    // A configured port must match; without one any port does (a proxy in front).
    expect(parseSandboxHost(`8000-${ID}.e2b.localhost:9000`, 'e2b.localhost:9000')).toBeDefined()
    expect(parseSandboxHost(`8000-${ID}.e2b.localhost:9001`, 'e2b.localhost:9000')).toBeUndefined()
    expect(parseSandboxHost(`8000-${ID}.e2b.example.com:443`, 'e2b.example.com')).toBeDefined()
    expect(parseSandboxHost(`8000-${ID}.localhost`, 'e2b.example.com')).toBeUndefined()
    expect(parseSandboxHost(`0-${ID}.localhost`, undefined)).toBeUndefined()
    expect(parseSandboxHost(`70000-${ID}.localhost`, undefined)).toBeUndefined()
    expect(parseSandboxHost('8000-web.localhost', undefined)).toBeUndefined()
    expect(parseSandboxHost('127.0.0.1:8080', undefined)).toBeUndefined()
    expect(parseSandboxHost(undefined, undefined)).toBeUndefined()
  })
})
