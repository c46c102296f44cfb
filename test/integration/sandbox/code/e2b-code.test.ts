import { Sandbox as CodeSandbox } from '@e2b/code-interpreter'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { requireCode } from '../../../../src/sandbox/code/index.js'
import { DEV_IMAGE } from '../../../../src/sandbox/profiles.js'
import type { Sandbox } from '../../../../src/sandbox/types.js'
import { type E2BEndpoint, startE2BEndpoint } from '../../../support/e2b-endpoint.js'
import { e2bFixture } from '../../../support/e2b-fixture.js'

/*
 * E2B's code interpreter against our E2B-compatible endpoint (`sbx serve`, E2B's base template on
 * the dev image): its /execute as the pinned `@e2b/code-interpreter` SDK calls it, and the E2B
 * provider's `code` capability on top of that SDK.
 */
let endpoint: E2BEndpoint
let fx: ReturnType<typeof e2bFixture>
let sb: Sandbox

beforeAll(async () => {
  endpoint = await startE2BEndpoint({ base: { image: DEV_IMAGE } })
  fx = e2bFixture(endpoint)
  sb = await fx.create()
}, 120_000)
afterAll(async () => {
  await sb?.close()
  expect(await fx?.cleanup()).toBe(0)
  expect(await endpoint?.close()).toBe(0)
})

describe('E2B code interpreter (our endpoint)', () => {
  test('the SDK runCode: state, logs, results, errors, js', async () => {
    const s = await CodeSandbox.connect(sb.ref.id, {
      apiKey: endpoint.apiKey,
      apiUrl: endpoint.apiUrl,
      sandboxUrl: endpoint.sandboxUrl,
    })
    await s.runCode('base = 40')
    const e = await s.runCode('print("x")\nbase + 2')
    expect(e.text).toBe('42')
    expect(e.logs.stdout).toEqual(['x\n'])
    const err = await s.runCode('raise KeyError("k")')
    expect(err.error).toMatchObject({ name: 'KeyError' })
    expect((await s.runCode('[1,2].map((v) => v * 2)', { language: 'js' })).text).toBe('[ 2, 4 ]')
  })

  test('the provider: code capability keeps state; the kernel restarts after a crash', async () => {
    const code = requireCode(sb)
    expect(await code.languages()).toEqual(['python', 'javascript'])
    const run = (c: string) => code.run({ code: c, language: 'python', timeoutMs: 20_000 })
    await run('z = "kept"')
    expect(await run('z')).toMatchObject({ text: "'kept'", error: null })
    const html = await run('class H:\n    def _repr_html_(self):\n        return "<b/>"\nH()')
    expect(html.outputs[0]).toMatchObject({ type: 'result', data: { 'text/html': '<b/>' } })
    const crash = await run('import os\nos._exit(2)')
    expect(crash.error?.name).toBe('KernelDied')
    expect(await run('"z" in globals()')).toMatchObject({ text: 'False' })
  })
})
