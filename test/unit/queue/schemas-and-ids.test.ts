import fc from 'fast-check'
import { describe, expect, test } from 'vitest'
import { deriveJobId, ExecJobResultSchema, ExecJobSchema, isJobId } from '../../../src/queue/index.js'
import { makeJob } from '../../support/queue-drivers.js'

describe('job ids', () => {
  test('are deterministic per (tenant, callId) and valid BullMQ ids', () => {
    fc.assert(
      fc.property(fc.string(), fc.string(), (tenant, callId) => {
        const id = deriveJobId(tenant, callId)
        expect(deriveJobId(tenant, callId)).toBe(id)
        expect(isJobId(id)).toBe(true)
        expect(id).not.toContain(':')
        expect(/^\d+$/.test(id)).toBe(false)
      }),
    )
  })

  test('differ across tenants and across the tenant/callId boundary', () => {
    expect(deriveJobId('acme', 'c1')).not.toBe(deriveJobId('globex', 'c1'))
    expect(deriveJobId('ab', 'c')).not.toBe(deriveJobId('a', 'bc'))
  })
})

describe('job schemas', () => {
  test('a job round-trips through JSON', () => {
    const job = makeJob('echo hi', {
      sessionId: 's',
      env: { A: '1' },
      cwd: '/workspace',
      stdin: 'x',
      idempotent: true,
    })
    expect(ExecJobSchema.parse(JSON.parse(JSON.stringify(job)))).toEqual(job)
  })

  test('unknown fields and bad timeouts are rejected', () => {
    expect(() => ExecJobSchema.parse({ ...makeJob('x'), extra: 1 })).toThrow()
    expect(() => ExecJobSchema.parse({ ...makeJob('x'), timeoutMs: 0 })).toThrow()
    expect(() => ExecJobSchema.parse({ ...makeJob('x'), tenant: '' })).toThrow()
  })

  test('results are a closed union with stable error codes', () => {
    expect(ExecJobResultSchema.parse({ status: 'cancelled', reason: 'r' })).toEqual({
      status: 'cancelled',
      reason: 'r',
    })
    expect(() =>
      ExecJobResultSchema.parse({ status: 'failed', code: 'NOT_A_CODE', message: 'm', retryable: false }),
    ).toThrow()
    expect(() => ExecJobResultSchema.parse({ status: 'exploded' })).toThrow()
    const completed = {
      status: 'completed',
      attempt: 1,
      workerId: 'w',
      result: {
        exitCode: null,
        signal: 'SIGKILL',
        stdout: '',
        stderr: '',
        timedOut: true,
        truncated: false,
        durationMs: 5,
        sandboxId: 'x',
      },
    }
    expect(ExecJobResultSchema.parse(completed)).toEqual(completed)
  })
})
