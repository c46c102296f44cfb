import { describe, expect, test } from 'vitest'
import { AppError } from '../../../src/errors.js'
import { resolveExecRequest, resolveSandboxPath } from '../../../src/sandbox/exec-request.js'

const base = { command: 'echo hi', timeoutMs: 1000, outputCapBytes: 10 }
const rules = { cwd: '/workspace', maxCommandBytes: 32 }
const codeOf = (fn: () => unknown): string | undefined => {
  try {
    fn()
  } catch (err) {
    return err instanceof AppError ? err.code : 'not an AppError'
  }
  return undefined
}

describe('resolveExecRequest (the checks every remote provider applies)', () => {
  test('fills defaults: cwd resolved against the sandbox, env {}, stdin as bytes', () => {
    expect(resolveExecRequest({ ...base, cwd: 'sub/../dir', stdin: 'é' }, rules)).toEqual({
      command: 'echo hi',
      cwd: '/workspace/dir',
      env: {},
      stdin: Buffer.from('é', 'utf8'),
      timeoutMs: 1000,
      outputCapBytes: 10,
    })
    expect(resolveExecRequest(base, rules).cwd).toBe('/workspace')
  })

  test('persistent shells: refused unless the provider has them; then env names must be identifiers', () => {
    expect(() => resolveExecRequest({ ...base, shell: 'persistent' }, rules)).toThrow(/shell: 'fresh'/)
    const shells = { ...rules, persistentShell: true }
    expect(resolveExecRequest({ ...base, shell: 'persistent', env: { A_1: 'x' } }, shells).env).toEqual({
      A_1: 'x',
    })
    expect(() => resolveExecRequest({ ...base, shell: 'persistent', env: { 'a.b': '1' } }, shells)).toThrow(
      /letters, digits and '_'/,
    )
  })

  test('rejects what no sandbox can run, saying what to change', () => {
    expect(codeOf(() => resolveExecRequest({ ...base, timeoutMs: 0 }, rules))).toBe('BAD_REQUEST')
    expect(codeOf(() => resolveExecRequest({ ...base, command: 'a\0b' }, rules))).toBe('BAD_REQUEST')
    expect(codeOf(() => resolveExecRequest({ ...base, command: 'x'.repeat(33) }, rules))).toBe(
      'PAYLOAD_TOO_LARGE',
    )
    expect(codeOf(() => resolveExecRequest({ ...base, env: { 'A=B': '1' } }, rules))).toBe('BAD_REQUEST')
    const strict = { ...rules, envName: (n: string) => /^[A-Z]+$/.test(n), envRule: 'upper case only' }
    expect(() => resolveExecRequest({ ...base, env: { lower: '1' } }, strict)).toThrow(/upper case only/)
    expect(resolveExecRequest({ ...base, env: { OK: '1' } }, strict).env).toEqual({ OK: '1' })
  })

  test('file paths resolve against the cwd; empty or NUL paths are refused', () => {
    expect(resolveSandboxPath('/workspace', 'a/b')).toBe('/workspace/a/b')
    expect(resolveSandboxPath('/workspace', '/etc/x')).toBe('/etc/x')
    expect(codeOf(() => resolveSandboxPath('/workspace', ''))).toBe('BAD_REQUEST')
  })
})
