import { Sandbox } from '@e2b/code-interpreter'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { e2bServe } from '../support/e2b-serve.js'

/**
 * An `@e2b/code-interpreter` app against `node bin/sbx.js serve`'s E2B-compatible endpoint: only its
 * connection settings point at us; its `code-interpreter-v1` template maps to the built-in dev
 * profile. runCode keeps state between cells and gives logs, results, errors as E2B's does.
 */
describe('@e2b/code-interpreter against sbx serve', () => {
  const e2b = e2bServe('e2bci')

  beforeAll(async () => {
    await e2b.start({
      config: {
        e2b: { templates: { 'code-interpreter-v1': 'dev' } },
        quotas: { requestsPerSecond: 1000 },
      },
    })
  }, 180_000)

  afterAll(() => e2b.stop(), 120_000)

  test('runCode: state, logs, main result, rich results, errors, javascript', async () => {
    const sbx = await Sandbox.create()
    try {
      await sbx.runCode('import math\nr = 3')
      const stdout: string[] = []
      const exec = await sbx.runCode('print("area")\nround(math.pi * r * r, 2)', {
        onStdout: (m) => void stdout.push(m.line),
      })
      expect(exec.text).toBe('28.27')
      expect(exec.logs).toEqual({ stdout: ['area\n'], stderr: [] })
      expect(stdout).toEqual(['area\n'])
      expect(exec.error).toBeUndefined()

      const html = await sbx.runCode(
        'class H:\n    def _repr_html_(self):\n        return "<p>x</p>"\ndisplay(H())',
      )
      expect(html.results[0]).toMatchObject({ html: '<p>x</p>', isMainResult: false })

      const failed = await sbx.runCode('1 / 0')
      expect(failed.error).toMatchObject({ name: 'ZeroDivisionError', value: 'division by zero' })
      expect(failed.error?.traceback).toContain('ZeroDivisionError')

      const js = await sbx.runCode('let items = [1, 2]; items.push(3); items.length', { language: 'js' })
      expect(js.text).toBe('3')
      expect((await sbx.runCode('items.join("-")', { language: 'js' })).text).toBe("'1-2-3'")

      const env = await sbx.runCode('import os\nos.environ["CELL"]', { envs: { CELL: 'v' } })
      expect(env.text).toBe("'v'")

      const bad = await sbx.runCode('1', { language: 'r' }).catch((e: unknown) => e)
      expect(String(bad)).toContain('400')
    } finally {
      await sbx.kill()
    }
  }, 180_000)
})
