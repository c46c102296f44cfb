/**
 * The fake through the bare e2b SDK (no adapter): the E2B behaviours the adapter relies on, each
 * surfacing as the SDK error class the real service produces.
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
import { startFakeE2B } from '../../fakes/e2b/index.js'
import { rejectionOf } from './fixtures.js'

const T = 120_000
const fake = await startFakeE2B()
const client = new E2B({ apiKey: fake.apiKey, apiUrl: fake.apiUrl, sandboxUrl: fake.sandboxUrl })
const sandbox = await client.Sandbox.create({ metadata: { 'fidelity-test': '1' }, timeoutMs: 120_000 })

afterAll(async () => {
  await fake.close()
  expect(await fake.containers()).toEqual([])
}, T)

describe('fake E2B through the bare SDK', () => {
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
    'the stream deadline ends the call (TimeoutError) but not the process (E2B#500)',
    async () => {
      const err = await rejectionOf(
        sandbox.commands.run('sleep 1.5; echo done > /tmp/survivor', { timeoutMs: 300 }),
      )
      expect(err).toBeInstanceOf(TimeoutError)
      // Waits inside the sandbox (bounded) for the process to finish on its own.
      const r = await sandbox.commands.run(
        'i=0; until [ -f /tmp/survivor ]; do i=$((i+1)); [ $i -gt 200 ] && exit 9; sleep 0.05; done; cat /tmp/survivor',
      )
      expect(r.stdout).toBe('done\n')
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

      const bad = new E2B({ apiKey: 'e2b_0000', apiUrl: fake.apiUrl, sandboxUrl: fake.sandboxUrl })
      expect(await rejectionOf(bad.Sandbox.list().nextItems())).toBeInstanceOf(AuthenticationError)
      fake.faults.failNextCreates(1)
      expect(await rejectionOf(client.Sandbox.create())).toBeInstanceOf(RateLimitError)

      const doomed = await client.Sandbox.create()
      await fake.faults.vanish(doomed.sandboxId)
      expect(await rejectionOf(doomed.commands.run('echo hi'))).toBeInstanceOf(SandboxNotFoundError)
      expect(await rejectionOf(doomed.getInfo())).toBeInstanceOf(SandboxNotFoundError)
      expect(await doomed.isRunning()).toBe(false)
      expect(await client.Sandbox.kill(doomed.sandboxId)).toBe(false)
    },
    T,
  )
})
