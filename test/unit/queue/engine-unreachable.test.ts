import { describe, expect, test } from 'vitest'
import { AppError } from '../../../src/errors.js'
import { engineUnreachable } from '../../../src/queue/engines/engine-consumer.js'

describe('engineUnreachable: which processor errors hand a job back to run beside a live engine', () => {
  test('the engine itself did not answer: handed back', () => {
    expect(
      engineUnreachable(new AppError('UNAVAILABLE', 'cannot reach the Docker engine (ECONNREFUSED)')),
    ).toBe(true)
    const socket = Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' })
    const create = new AppError('SANDBOX_CREATE_FAILED', 'creating a container: cannot reach', {
      cause: socket,
    })
    expect(
      engineUnreachable(new AppError('SANDBOX_CREATE_FAILED', 'after 5 attempts', { cause: create })),
    ).toBe(true)
  })

  test('anything else fails the job as before', () => {
    expect(engineUnreachable(new AppError('SANDBOX_LOST', 'the connection to its agent ended'))).toBe(false)
    expect(engineUnreachable(new AppError('QUOTA_EXCEEDED', 'full'))).toBe(false)
    expect(engineUnreachable(new Error('boom'))).toBe(false)
    expect(engineUnreachable(undefined)).toBe(false)
  })
})
