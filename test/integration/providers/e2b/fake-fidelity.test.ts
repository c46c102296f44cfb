/**
 * Our E2B-compatible endpoint (the E2B provider's test double since test/fakes/e2b was removed)
 * through the bare e2b SDK (no adapter): the E2B behaviours the adapter relies on, each surfacing as
 * the SDK error class the real service produces (../shared/research/fake-fidelity.md).
 */
import {
  AuthenticationError,
  CommandExitError,
  E2B,
  FileNotFoundError,
  RateLimitError,
  SandboxNotFoundError,
  TimeoutError,
} from 'e2b'
import { afterAll, describe, expect, test } from 'vitest'
import { startE2BEndpoint } from '../../../support/e2b-endpoint.js'
import { rejectionOf } from '../../../support/e2b-fixture.js'

const T = 120_000
// Two sandboxes per tenant, so the concurrency limit's 429 can be reached.
const endpoint = await startE2BEndpoint({ quotas: { maxSandboxes: 2 } })
const client = new E2B({ apiKey: endpoint.apiKey, apiUrl: endpoint.apiUrl, sandboxUrl: endpoint.sandboxUrl })
const sandbox = await client.Sandbox.create({ metadata: { 'fidelity-test': '1' }, timeoutMs: 120_000 })

afterAll(async () => {
  expect(await endpoint.close()).toBe(0)
}, T)

describe('our E2B endpoint through the bare SDK', () => {
  test(
    'a non-zero exit is reported in the end event: CommandExitError with the code and both streams',
    async () => {
      const err = await rejectionOf(sandbox.commands.run('echo out; echo err >&2; exit 3'))
      expect(err).toBeInstanceOf(CommandExitError)
      expect(err).toMatchObject({ exitCode: 3, stdout: 'out\n', stderr: 'err\n' })
    },
    T,
  )

  test(
    'the stream deadline ends the call (TimeoutError) and kills the process, as envd does since March 2025',
    async () => {
      // E2B#500 (2024-12) kept the process running; envd now starts it under the request's
      // Connect deadline (infra 868a488a5), so it is killed with the stream.
      const err = await rejectionOf(
        sandbox.commands.run('sleep 1.5; echo done > /tmp/survivor', { timeoutMs: 300 }),
      )
      expect(err).toBeInstanceOf(TimeoutError)
      // Past the 1.5 s the process would have taken, it never wrote its file.
      const r = await sandbox.commands.run('sleep 2; [ -f /tmp/survivor ] && echo survived || echo killed')
      expect(r.stdout).toBe('killed\n')
    },
    T,
  )

  test(
    'stdin through SendInput and CloseStdin; processes are listed and killed by pid',
    async () => {
      const cat = await sandbox.commands.run('cat', { background: true, stdin: true })
      await sandbox.commands.sendStdin(cat.pid, 'piped\n')
      await sandbox.commands.closeStdin(cat.pid)
      expect((await cat.wait()).stdout).toBe('piped\n')
      const sleeper = await sandbox.commands.run('sleep 60', { background: true })
      expect((await sandbox.commands.list()).map((p) => p.pid)).toContain(sleeper.pid)
      expect(await sandbox.commands.kill(sleeper.pid)).toBe(true)
      expect(await rejectionOf(sleeper.wait())).toBeInstanceOf(CommandExitError)
      expect(await sandbox.commands.kill(sleeper.pid)).toBe(false)
    },
    T,
  )

  test(
    'files: binary write and read back; a missing file is FileNotFoundError',
    async () => {
      const bytes = new Uint8Array([0, 1, 2, 254, 255])
      await sandbox.files.write('/tmp/f/bytes.bin', new Blob([bytes]), { useOctetStream: true })
      expect(await sandbox.files.read('/tmp/f/bytes.bin', { format: 'bytes' })).toEqual(bytes)
      expect(await rejectionOf(sandbox.files.read('/tmp/nope'))).toBeInstanceOf(FileNotFoundError)
    },
    T,
  )

  test(
    'control plane: metadata filter, info with lifecycle, 401, 429, and a vanished sandbox',
    async () => {
      const found = await client.Sandbox.list({ query: { metadata: { 'fidelity-test': '1' } } }).nextItems()
      expect(found.map((s) => s.sandboxId)).toEqual([sandbox.sandboxId])
      const info = await sandbox.getInfo()
      expect(info.lifecycle).toEqual({ onTimeout: 'kill', autoResume: false })
      expect(info.envdVersion >= '0.1.0').toBe(true)

      const bad = new E2B({ apiKey: 'e2b_0000', apiUrl: endpoint.apiUrl, sandboxUrl: endpoint.sandboxUrl })
      expect(await rejectionOf(bad.Sandbox.list().nextItems())).toBeInstanceOf(AuthenticationError)
      // The tenant's two sandboxes taken: E2B's concurrency limit, a 429 the SDK shows at once.
      const filler = await client.Sandbox.create()
      // A sandbox counts once it holds a container: the endpoint binds one at the first call.
      await filler.commands.run('true')
      expect(await rejectionOf(client.Sandbox.create())).toBeInstanceOf(RateLimitError)
      await filler.kill()

      const doomed = await client.Sandbox.create()
      // Killed by another client of the account.
      expect(await client.Sandbox.kill(doomed.sandboxId)).toBe(true)
      expect(await rejectionOf(doomed.commands.run('echo hi'))).toBeInstanceOf(SandboxNotFoundError)
      expect(await rejectionOf(doomed.getInfo())).toBeInstanceOf(SandboxNotFoundError)
      expect(await doomed.isRunning()).toBe(false)
      expect(await client.Sandbox.kill(doomed.sandboxId)).toBe(false)
    },
    T,
  )
})
