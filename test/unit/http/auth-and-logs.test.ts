import { Writable } from 'node:stream'
import { describe, expect, test } from 'vitest'
import { AppError } from '../../../src/errors.js'
import { STATUS_OF, toErrorResponse } from '../../../src/http/errors.js'
import { Keyring, hashKey } from '../../../src/http/keyring.js'
import { RateLimiter } from '../../../src/services/rate-limit.js'
import { createLogger } from '../../../src/logger.js'

describe('keyring', () => {
  const ring = new Keyring([
    { key: 'acme-key-0123456789abcdef', tenant: 'acme' },
    { sha256: hashKey('globex-key-0123456789abcdef'), tenant: 'globex', admin: true },
  ])

  test('maps keys to tenants; unknown keys get nothing', () => {
    expect(ring.verify('acme-key-0123456789abcdef')).toMatchObject({ tenant: 'acme', admin: false })
    expect(ring.verify('globex-key-0123456789abcdef')).toMatchObject({ tenant: 'globex', admin: true })
    expect(ring.verify('acme-key-0123456789abcdeX')).toBeUndefined()
    expect(ring.verify('')).toBeUndefined()
  })

  test('keeps only hashes; keyId is a hash prefix', () => {
    expect(JSON.stringify(ring)).not.toContain('acme-key')
    expect(ring.verify('acme-key-0123456789abcdef')?.keyId).toBe(
      hashKey('acme-key-0123456789abcdef').slice(0, 8),
    )
  })
})

describe('rate limiter', () => {
  test('bursts, then refuses with a retry-after, then refills', () => {
    let now = 0
    const rl = new RateLimiter(2, 2, () => now)
    expect(rl.take('t').ok).toBe(true)
    expect(rl.take('t').ok).toBe(true)
    const refused = rl.take('t')
    expect(refused).toEqual({ ok: false, retryAfterMs: 500 })
    expect(rl.take('other').ok).toBe(true)
    now = 500
    expect(rl.take('t').ok).toBe(true)
  })
})

describe('error mapping', () => {
  test('AppErrors keep code and message; others become a generic 500', () => {
    expect(toErrorResponse(new AppError('NOT_FOUND', 'no such job'))).toEqual({
      status: 404,
      body: { error: { code: 'NOT_FOUND', message: 'no such job' } },
    })
    expect(toErrorResponse(new Error('secret internals'))).toEqual({
      status: 500,
      body: { error: { code: 'INTERNAL', message: 'internal error; see the server log' } },
    })
    expect(STATUS_OF.RATE_LIMITED).toBe(429)
  })
})

describe('logger', () => {
  test('never writes secrets: headers, known values, scanner findings', () => {
    const lines: string[] = []
    const dest = new Writable({
      write(chunk: Buffer, _enc, cb) {
        lines.push(chunk.toString())
        cb()
      },
    })
    const log = createLogger({ secrets: ['acme-key-0123456789abcdef'], destination: dest })
    log.info({ req: { headers: { authorization: 'Bearer acme-key-0123456789abcdef' } } }, 'request')
    log.info('tenant used key acme-key-0123456789abcdef')
    log.warn({ output: 'found AKIAIOSFODNN7EXAMPLE in output' }, 'scan')
    log.error(new Error('failed with token ghp_abcdefghijklmnopqrstuvwxyz0123456789'))
    const all = lines.join('')
    expect(all).not.toContain('acme-key-0123456789abcdef')
    expect(all).not.toContain('AKIAIOSFODNN7EXAMPLE')
    expect(all).not.toContain('ghp_abcdefghijklmnopqrstuvwxyz')
    expect(all).toContain('[REDACTED')
    expect(lines).toHaveLength(4)
  })
})
