import { randomUUID } from 'node:crypto'
import { resolve } from 'node:path'
import { afterAll, beforeAll, expect, test } from 'vitest'
import { createDaytonaProvider } from '../../../../providers/daytona/index.js'
import { requireCode } from '../../../../src/sandbox/code/index.js'
import { DEV_IMAGE, resolveProfile } from '../../../../src/sandbox/profiles.js'
import type { Sandbox, SandboxProvider } from '../../../../src/sandbox/types.js'
import { type FakeDaytona, startFakeDaytona } from '../../../fakes/daytona/index.js'

/*
 * Daytona's own code run (`process.codeRun`) is stateless, so a Daytona sandbox gets the service's
 * kernel as a background process (agentBinaryPath uploads the agent through the toolbox): the
 * real SDK against the local fake, on the dev image.
 */
let fake: FakeDaytona
let provider: SandboxProvider
let sb: Sandbox

beforeAll(async () => {
  fake = await startFakeDaytona({ image: DEV_IMAGE })
  provider = createDaytonaProvider({
    apiKey: fake.apiKey,
    apiUrl: fake.apiUrl,
    instanceId: 'code-test',
    agentBinaryPath: resolve('.sbx/sbx-agent'),
  })
  sb = await provider.create(resolveProfile('code', { provider: 'daytona' }), {
    labels: { 'sandbox-router.test-run': randomUUID() },
  })
}, 120_000)
afterAll(async () => {
  if (sb) await provider.destroy(sb.ref)
  await provider?.close?.()
  await fake?.close()
})

test('state persists between cells; errors; javascript', async () => {
  const code = requireCode(sb)
  expect(await code.languages()).toEqual(['python', 'javascript'])
  const py = (c: string) => code.run({ code: c, language: 'python', timeoutMs: 20_000 })
  await py('import statistics\nvals = [1, 2, 3, 4]')
  expect(await py('print("m")\nstatistics.mean(vals)')).toMatchObject({
    stdout: 'm\n',
    text: '2.5',
    error: null,
  })
  expect((await py('vals[10]')).error).toMatchObject({ name: 'IndexError' })
  const js = await code.run({ code: 'const a = 5; a * a', language: 'javascript', timeoutMs: 20_000 })
  expect(js.text).toBe('25')
}, 120_000)
