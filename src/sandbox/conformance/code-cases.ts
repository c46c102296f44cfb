/**
 * The code-interpreter case of the provider conformance suite: where a sandbox has a code
 * interpreter ({@link codeOf}) and its image has the language (`languages()`), a cell's state
 * persists into the next, the last value is the result and an exception is the result's `error`.
 * A sandbox without one, or an image without python3, passes by its capability saying so.
 * Imports vitest: not re-exported from the sandbox index.
 */
import { expect, test } from 'vitest'
import { codeOf } from '../code/sandbox-code.js'
import type { ConformanceContext } from './io-cases.js'

/** Registers the code-interpreter case (gated on the `code` capability and the image's languages). */
export function registerCodeCases(ctx: ConformanceContext): void {
  const { sandbox, timeout } = ctx
  test(
    'code interpreter: state persists between cells; last value; exception as error',
    async () => {
      const code = codeOf(sandbox())
      if (!code) return expect(code).toBeUndefined()
      const languages = await code.languages()
      if (!languages.includes('python')) return expect(languages).not.toContain('python')
      const run = (c: string) => code.run({ code: c, language: 'python', timeoutMs: 20_000 })
      expect((await run('conformance_value = 20')).error).toBeNull()
      expect(await run('print("out")\nconformance_value + 22')).toMatchObject({
        stdout: 'out\n',
        text: '42',
        error: null,
      })
      expect((await run('1 / 0')).error).toMatchObject({ name: 'ZeroDivisionError' })
    },
    timeout,
  )
}
