import { afterAll, beforeAll, expect, test } from 'vitest'
import { createDaytonaProvider } from '../../../providers/daytona/index.js'
import { resolveProfile } from '../../../src/sandbox/profiles.js'
import type { Sandbox, SandboxProvider } from '../../../src/sandbox/types.js'
import { type FakeDaytona, startFakeDaytona } from '../../fakes/daytona/index.js'

// What the Daytona persistent shell must do beyond the conformance suite, against the fake daemon.
let fake: FakeDaytona
let provider: SandboxProvider
let sandbox: Sandbox

beforeAll(async () => {
  fake = await startFakeDaytona()
  provider = createDaytonaProvider({ apiKey: fake.apiKey, apiUrl: fake.apiUrl, instanceId: 'pshell-test' })
  sandbox = await provider.create(resolveProfile('pshell', { provider: 'daytona' }), {
    labels: { 'sandbox-router.test': 'daytona-persistent-shell' },
  })
}, 120_000)
afterAll(async () => {
  await sandbox?.close()
  if (sandbox) await provider.destroy(sandbox.ref)
  await provider?.close?.()
  await fake?.close()
}, 120_000)

const base = { timeoutMs: 10_000, outputCapBytes: 1 << 20 }

test('many calls leave no processes behind (the daemon leaves a sleep per session command)', async () => {
  for (let i = 0; i < 40; i++) {
    expect((await sandbox.exec({ ...base, command: `echo ${i}`, shell: 'persistent' })).stdout).toBe(`${i}\n`)
  }
  const ps = await sandbox.exec({ ...base, command: 'ps -o args | grep -c "^sleep infinity"' })
  // The shell's own start leaves two; without the cleanup there would be over 40.
  expect(Number(ps.stdout.trim())).toBeLessThanOrEqual(3)
}, 120_000)

test('output without a final newline comes back exact, though the daemon copies it line by line', async () => {
  const r = await sandbox.exec({ ...base, command: 'printf "a\\nb"; printf err >&2', shell: 'persistent' })
  expect(r).toMatchObject({ stdout: 'a\nb', stderr: 'err', exitCode: 0 })
}, 60_000)
