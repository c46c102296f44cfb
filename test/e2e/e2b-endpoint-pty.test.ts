import { randomBytes } from 'node:crypto'
import { CommandExitError, Sandbox } from 'e2b'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { join } from 'node:path'
import type { ConfigInput } from '../../src/config/schema.js'
import { PTY_BLOCK_REASON } from './fixtures/e2b-pty-policy.js'
import { type E2BConnection, e2bServe } from '../support/e2b-serve.js'
import type { LineChild } from '../support/redis-child.js'
import {
  configDir,
  fleetConfig,
  removeScope,
  startSbxServer,
  startSbxWorker,
  uniqueName,
} from '../support/sbx-cli.js'
import type { SbxServer } from '../support/sbx-cli.js'

const KEY = `acme_e2bpty_${'p'.repeat(24)}`
const GLOBEX = `globex_e2bpty_${'g'.repeat(24)}`

/** How long a test waits for a terminal to print what it expects before failing with what it printed (ms). */
const OUTPUT_DEADLINE_MS = 20_000

/**
 * Collects a terminal's output; `until(re)` resolves once it matches (no fixed sleeps), and fails
 * with the output so far when it has not by {@link OUTPUT_DEADLINE_MS}.
 */
function terminalOutput(): {
  onData: (data: Uint8Array) => void
  until: (re: RegExp) => Promise<string>
  readonly text: string
} {
  const decoder = new TextDecoder()
  let text = ''
  let waiters: { re: RegExp; resolve: (s: string) => void; timer: NodeJS.Timeout }[] = []
  const check = (): void => {
    const met = waiters.filter((w) => w.re.test(text))
    waiters = waiters.filter((w) => !met.includes(w))
    for (const w of met) {
      clearTimeout(w.timer)
      w.resolve(text)
    }
  }
  return {
    onData: (data) => {
      text += decoder.decode(data, { stream: true })
      check()
    },
    until: (re) =>
      new Promise((resolve, reject) => {
        const timer = setTimeout(
          () =>
            reject(
              new Error(
                `the terminal did not print ${re} within ${OUTPUT_DEADLINE_MS} ms; it printed ${JSON.stringify(text)}`,
              ),
            ),
          OUTPUT_DEADLINE_MS,
        )
        waiters.push({ re, resolve, timer })
        check()
      }),
    get text() {
      return text
    },
  }
}

const typed = (s: string): Uint8Array => new TextEncoder().encode(s)

/**
 * E2B's PTYs through `node bin/sbx.js serve` and the real `e2b` SDK: `sandbox.pty.create` runs a
 * login bash on a terminal of the sandbox (TERM, the given envs, the window size), input typed into
 * it runs, a resize reaches `stty`, a second stream re-attaches by pid after a disconnect, and kill
 * ends it (the pid gone in the sandbox).
 */
describe('E2B endpoint: PTYs (sandbox.pty)', () => {
  const e2b = e2bServe('e2bpty')
  const { scope } = e2b
  let conn: E2BConnection

  beforeAll(async () => {
    await e2b.start({
      config: {
        apiKeys: [
          { keyEnv: 'E2BPTY_ACME_KEY', tenant: 'acme' },
          { keyEnv: 'E2BPTY_GLOBEX_KEY', tenant: 'globex' },
        ],
        extensions: [join(import.meta.dirname, 'fixtures', 'e2b-pty-policy.ts')],
        e2b: { templates: { base: 'e2b' } },
        quotas: { requestsPerSecond: 1000 },
      },
      env: { SBX_API_KEY: KEY, E2BPTY_ACME_KEY: KEY, E2BPTY_GLOBEX_KEY: GLOBEX },
      key: KEY,
      sdkEnv: false,
    })
    conn = e2b.conn
  }, 180_000)

  afterAll(() => e2b.stop(), 120_000)

  test('create, type, resize, reconnect, list, kill', async () => {
    const sbx = await Sandbox.create('base', { ...conn, metadata: { suite: scope } })
    try {
      const first = terminalOutput()
      const terminal = await sbx.pty.create({
        cols: 80,
        rows: 24,
        onData: first.onData,
        envs: { MARK: 'pty-e2e' },
      })
      expect(terminal.pid).toBeGreaterThan(0)
      // The typed line echoes `$TERM` literally; only the shell's expansion prints the values.
      await sbx.pty.sendInput(terminal.pid, typed('echo "T=$TERM M=$MARK"; stty size\n'))
      await first.until(/T=xterm-256color M=pty-e2e/)
      await first.until(/^24 80\r?$/m)

      await sbx.pty.resize(terminal.pid, { cols: 120, rows: 40 })
      await sbx.pty.sendInput(terminal.pid, typed('stty size\n'))
      await first.until(/^40 120\r?$/m)

      // A bad size is refused with what to give.
      await expect(sbx.pty.resize(terminal.pid, { cols: 70_000, rows: 40 })).rejects.toThrow(/1-65535/)

      // Disconnecting the stream leaves the terminal running; connect re-attaches by pid.
      await terminal.disconnect()
      const second = terminalOutput()
      const again = await sbx.pty.connect(terminal.pid, { onData: second.onData })
      expect(again.pid).toBe(terminal.pid)
      await sbx.pty.sendInput(terminal.pid, typed('echo again-$((6*7))\n'))
      await second.until(/again-42/)
      expect(first.text).not.toContain('again-42')

      expect((await sbx.commands.list()).map((p) => p.pid)).toContain(terminal.pid)

      expect(await sbx.pty.kill(terminal.pid)).toBe(true)
      const ended = await again.wait().catch((e: unknown) => e)
      expect(ended).toBeInstanceOf(CommandExitError)
      expect((ended as CommandExitError).exitCode).toBe(-1)
      // Gone in the sandbox, and for the endpoint.
      await expect(sbx.commands.run(`kill -0 ${terminal.pid}`)).rejects.toBeInstanceOf(CommandExitError)
      expect(await sbx.pty.kill(terminal.pid)).toBe(false)
    } finally {
      await sbx.kill()
    }
  }, 120_000)

  test('the shell’s exit status ends the PTY; a PTY has no stdin to close', async () => {
    const sbx = await Sandbox.create('base', { ...conn, metadata: { suite: scope } })
    try {
      const out = terminalOutput()
      const terminal = await sbx.pty.create({ cols: 80, rows: 24, onData: out.onData })
      await expect(sbx.commands.closeStdin(terminal.pid)).rejects.toThrow(/Ctrl\+D/)
      await sbx.pty.sendInput(terminal.pid, typed('exit 3\n'))
      const ended = await terminal.wait().catch((e: unknown) => e)
      expect(ended).toBeInstanceOf(CommandExitError)
      expect((ended as CommandExitError).exitCode).toBe(3)
    } finally {
      await sbx.kill()
    }
  }, 120_000)

  test('a PTY passes the server policy: its command line blocked, the SDK gets the reason', async () => {
    const sbx = await Sandbox.create('base', { ...conn, apiKey: GLOBEX, metadata: { suite: scope } })
    try {
      await expect(sbx.pty.create({ cols: 80, rows: 24, onData: () => undefined })).rejects.toThrow(
        PTY_BLOCK_REASON,
      )
      expect(await sbx.commands.list()).toEqual([])
    } finally {
      await sbx.kill()
    }
  }, 120_000)

  test('command-scoped envs reach the command and no later one, as under envd', async () => {
    const sbx = await Sandbox.create('base', { ...conn, metadata: { suite: scope } })
    try {
      const scoped = await sbx.commands.run('echo "[$FOO]"', { envs: { FOO: 'bar' } })
      expect(scoped.stdout).toBe('[bar]\n')
      expect((await sbx.commands.run('echo "[$FOO]"')).stdout).toBe('[]\n')
    } finally {
      await sbx.kill()
    }
  }, 120_000)
})

/**
 * The same through `sbx api` in an engine-routed fleet (a worker beside the engine, Redis between):
 * the terminal opens on the worker through its gateway, with the command, envs and directory the SDK
 * asked for; a second API replica lists the PTY and names the replica that holds it.
 */
describe('E2B endpoint: PTYs through sbx api + sbx worker (engine routing)', () => {
  const scope = uniqueName('e2bptyf')
  let api: SbxServer
  let api2: SbxServer
  let worker: LineChild

  beforeAll(async () => {
    const config = fleetConfig(scope, {
      queue: { engineRouting: true },
      fleet: { secret: randomBytes(32).toString('hex') },
      quotas: { requestsPerSecond: 1000 },
    } as Partial<ConfigInput>)
    const cwd = configDir(config)
    const env = { SBX_API_KEY: KEY }
    worker = await startSbxWorker({ config, cwd, env })
    api = await startSbxServer('api', { config, cwd, env })
    api2 = await startSbxServer('api', { config, cwd, env })
  }, 180_000)

  afterAll(async () => {
    await api?.stop()
    await api2?.stop()
    await worker?.stop()
    await removeScope(scope)
  }, 120_000)

  test('envs, cwd and input reach the terminal on the worker; another replica lists it and names its holder', async () => {
    const one = { apiUrl: api.url, sandboxUrl: api.url, apiKey: KEY }
    const two = { apiUrl: api2.url, sandboxUrl: api2.url, apiKey: KEY }
    const sbx = await Sandbox.create('base', { ...one, metadata: { suite: scope } })
    try {
      const out = terminalOutput()
      const terminal = await sbx.pty.create({
        cols: 80,
        rows: 24,
        cwd: '/tmp',
        onData: out.onData,
        envs: { MARK: 'through-gateway' },
      })
      await sbx.pty.sendInput(terminal.pid, typed('echo "T=$TERM M=$MARK D=$(pwd)"\n'))
      await out.until(/T=xterm-256color M=through-gateway D=\/tmp/)

      const other = await Sandbox.connect(sbx.sandboxId, two)
      expect((await other.commands.list()).map((p) => p.pid)).toContain(terminal.pid)
      await expect(other.pty.sendInput(terminal.pid, typed('echo x\n'))).rejects.toThrow(
        /held by the API replica that created it/,
      )

      expect(await sbx.pty.kill(terminal.pid)).toBe(true)
      expect((await other.commands.list()).map((p) => p.pid)).not.toContain(terminal.pid)
    } finally {
      await sbx.kill()
    }
  }, 120_000)
})
