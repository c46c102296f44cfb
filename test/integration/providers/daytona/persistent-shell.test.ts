import { afterAll, beforeAll, expect, test } from 'vitest'
import { createDaytonaProvider } from '../../../../providers/daytona/index.js'
import { resolveProfile } from '../../../../src/sandbox/profiles.js'
import type { Sandbox, SandboxProvider } from '../../../../src/sandbox/types.js'
import { droppedMarker, outputSplit } from '../../../../src/sandbox/output-cap.js'
import { type FakeDaytona, startFakeDaytona } from '../../../fakes/daytona/index.js'

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

test('an output flood is capped inside the sandbox: the logs polled never carry it', async () => {
  const logs = 'GET /process/session/{id}/command/{id}/logs'
  const before = fake.sentBytes.get(logs) ?? 0
  const cap = 64 * 1024
  const r = await sandbox.exec({
    ...base,
    timeoutMs: 60_000,
    outputCapBytes: cap,
    command: 'yes flood | head -c 20000000; echo tail >&2; yes err | head -c 20000000 >&2; cd /tmp; (exit 3)',
    shell: 'persistent',
  })
  expect(r).toMatchObject({ exitCode: 3, truncated: true, timedOut: false })
  const flood = 'flood\n'.repeat(3_333_334).slice(0, 20_000_000)
  const { head, tail } = outputSplit(cap)
  expect(r.stdout).toBe(flood.slice(0, head) + droppedMarker(20_000_000 - cap) + flood.slice(-tail))
  expect(r.stderr.startsWith('tail\nerr\n')).toBe(true)
  expect(r.stderr).toHaveLength(cap + droppedMarker(20_000_005 - cap).length)
  // 40 MB were written in the sandbox; each poll downloads the whole log, which holds the two caps.
  const polled = (fake.sentBytes.get(logs) ?? 0) - before
  expect(polled).toBeGreaterThan(2 * cap)
  expect(polled).toBeLessThan(4 * 1024 * 1024)
  // The shell is the same one: the cd of the flooding call stayed.
  expect(await sandbox.exec({ ...base, command: 'pwd', shell: 'persistent' })).toMatchObject({
    stdout: '/tmp\n',
    shellRestarted: false,
  })
}, 120_000)
