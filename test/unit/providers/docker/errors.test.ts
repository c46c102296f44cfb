import { constants } from 'node:os'
import { describe, expect, test } from 'vitest'
import { execError, fileError, stoppedState } from '../../../../providers/docker/errors.js'

const { E2BIG, EINVAL, EISDIR, ENOENT, ENOSPC } = constants.errno

describe('docker file errors and stopped states', () => {
  test('a non-regular file named by the agent is a 400 saying what it is', () => {
    const fifo = fileError('sb1', '/workspace/fifo', { errno: EINVAL, op: 'open', detail: 'fifo' }, 'write')
    expect(fifo.code).toBe('BAD_REQUEST')
    expect(fifo.message).toBe(
      'cannot write /workspace/fifo in sandbox sb1: it is a FIFO (named pipe), not a regular file (EINVAL); pass the path of a regular file',
    )
    const dir = fileError('sb1', '/workspace', { errno: EISDIR, op: 'open', detail: 'directory' }, 'read')
    expect(dir.message).toMatch(
      /^cannot read \/workspace in sandbox sb1: it is a directory, not a regular file/,
    )
  })

  test('an older agent (detail = the path) keeps the errno-based messages', () => {
    const old = fileError('sb1', '/dev/null', { errno: EINVAL, op: 'open', detail: '/dev/null' }, 'write')
    expect(old).toMatchObject({
      code: 'BAD_REQUEST',
      message: expect.stringContaining('EINVAL; pass the path'),
    })
    const missing = fileError('sb1', '/x', { errno: ENOENT, op: 'open', detail: '/x' }, 'read')
    expect(missing.code).toBe('NOT_FOUND')
  })

  test('the idle exit code says the sandbox ended itself; other exits stay as they were', () => {
    expect(stoppedState('exited', 75)).toMatch(
      /^exited, exit code 75: it ended itself after nothing was attached/,
    )
    expect(stoppedState('exited', 137)).toBe('exited, exit code 137')
    expect(stoppedState('created', 75)).toBe('created, exit code 75')
  })

  test('a full disk is NO_SPACE (507), not a quota to retry', () => {
    const full = fileError('sb1', '/workspace/big', { errno: ENOSPC, op: 'write', detail: '' }, 'write')
    expect(full.code).toBe('NO_SPACE')
    expect(full.message).toContain('diskMb')
  })

  test('E2BIG at exec names the size, not a missing shell', () => {
    const big = execError('sb1', { errno: E2BIG, op: 'exec', detail: '/bin/bash' })
    expect(big.code).toBe('BAD_REQUEST')
    expect(big.message).toContain('too large')
    expect(execError('sb1', { errno: ENOENT, op: 'exec', detail: '/bin/bash' }).code).toBe('CONFIG_INVALID')
  })
})
