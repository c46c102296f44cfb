import { execFile } from 'node:child_process'
import { join } from 'node:path'
import { promisify } from 'node:util'
import { ALL_TRAFFIC, CommandExitError, Sandbox, TimeoutError } from 'e2b'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { BLOCK_REASON } from './fixtures/e2b-block-policy.js'
import { type E2BConnection, e2bServe } from '../support/e2b-serve.js'
import { scopeContainers } from '../support/sbx-cli.js'
import type { SbxServer } from '../support/sbx-cli.js'

const run = promisify(execFile)
const ACME = `acme_e2b_${'a'.repeat(24)}`
const GLOBEX = `globex_e2b_${'g'.repeat(24)}`

/**
 * The E2B-compatible endpoint of `node bin/sbx.js serve`, driven by the real `e2b` SDK with only its
 * connection settings (E2B_API_URL, E2B_SANDBOX_URL, E2B_API_KEY) pointed at it: each sandbox is one
 * of our Docker sessions; commands pass the server's tool-call policy; tenants stay apart.
 */
describe('E2B-compatible endpoint through sbx serve (e2b SDK)', () => {
  const e2b = e2bServe('e2bep')
  const { scope } = e2b
  let srv: SbxServer
  let conn: E2BConnection

  beforeAll(async () => {
    // The app's only change: where E2B is (E2B_API_URL, E2B_SANDBOX_URL), and which key (E2B_API_KEY).
    srv = await e2b.start({
      config: {
        apiKeys: [
          { keyEnv: 'E2BEP_ACME_KEY', tenant: 'acme' },
          { keyEnv: 'E2BEP_GLOBEX_KEY', tenant: 'globex' },
        ],
        extensions: [join(import.meta.dirname, 'fixtures', 'e2b-block-policy.ts')],
        e2b: { templates: { base: 'e2b', python: 'default', net: 'e2b-net' } },
        // A template whose profile has a network (an egress allowlist): creates may narrow it.
        profiles: { 'e2b-net': { provider: 'docker', network: { allow: ['example.invalid'] } } },
        quotas: { requestsPerSecond: 1000, maxSandboxes: 2 },
      },
      env: { SBX_API_KEY: ACME, E2BEP_ACME_KEY: ACME, E2BEP_GLOBEX_KEY: GLOBEX },
      key: ACME,
    })
    conn = e2b.conn
  }, 180_000)

  afterAll(() => e2b.stop(), 120_000)

  test('create, run (stdout, stderr, exit code), files, list by metadata, kill', async () => {
    const sbx = await Sandbox.create('base', { metadata: { suite: scope, role: 'main' } })
    expect(sbx.sandboxId).toMatch(/^e2b-/)
    const hi = await sbx.commands.run('echo hi')
    expect(hi).toMatchObject({ stdout: 'hi\n', stderr: '', exitCode: 0 })
    // The sandbox is one of our sessions: its Docker container carries the server's scope label.
    expect(await scopeContainers(scope)).toHaveLength(1)

    const failed = await sbx.commands.run('echo out; echo err >&2; exit 3').catch((e: unknown) => e)
    expect(failed).toBeInstanceOf(CommandExitError)
    expect(failed).toMatchObject({ exitCode: 3, stdout: 'out\n', stderr: 'err\n' })

    const streamed: string[] = []
    await sbx.commands.run('for i in 1 2 3; do echo line$i; done', { onStdout: (d) => void streamed.push(d) })
    expect(streamed.join('')).toBe('line1\nline2\nline3\n')

    // Without `stdin: true` a command reads EOF at once, as under envd.
    expect((await sbx.commands.run('cat; echo eof')).stdout).toBe('eof\n')

    const env = await sbx.commands.run('echo "$GREETING"', { envs: { GREETING: 'hello e2b' } })
    expect(env.stdout).toBe('hello e2b\n')

    await sbx.files.write('/tmp/multi.txt', 'multipart body')
    expect(await sbx.files.read('/tmp/multi.txt')).toBe('multipart body')
    await sbx.files.write('/tmp/octet.txt', 'octet body', { useOctetStream: true })
    expect(await sbx.files.read('/tmp/octet.txt')).toBe('octet body')
    expect((await sbx.commands.run('cat /tmp/multi.txt /tmp/octet.txt')).stdout).toBe(
      'multipart bodyoctet body',
    )
    await expect(sbx.files.read('/tmp/none.txt')).rejects.toThrow(/does not exist|not found/i)

    const other = await Sandbox.create('python', { metadata: { suite: scope, role: 'other' } })
    const mine = await Sandbox.list({ query: { metadata: { suite: scope, role: 'main' } } }).nextItems()
    expect(mine.map((s) => s.sandboxId)).toEqual([sbx.sandboxId])
    expect(mine[0]).toMatchObject({
      templateId: 'base',
      metadata: { suite: scope, role: 'main' },
      state: 'running',
    })
    const paged = Sandbox.list({ query: { metadata: { suite: scope } }, limit: 1 })
    const pages = [await paged.nextItems()]
    expect(paged.hasNext).toBe(true)
    pages.push(await paged.nextItems())
    expect(paged.hasNext).toBe(false)
    expect(
      pages
        .flat()
        .map((s) => s.sandboxId)
        .sort(),
    ).toEqual([sbx.sandboxId, other.sandboxId].sort())

    const info = await sbx.getInfo()
    expect(info).toMatchObject({ sandboxId: sbx.sandboxId, templateId: 'base' })
    await sbx.setTimeout(120_000)
    expect((await sbx.getInfo()).endAt.getTime()).toBeGreaterThan(Date.now() + 100_000)

    const again = await Sandbox.connect(sbx.sandboxId)
    expect((await again.commands.run('cat /tmp/multi.txt')).stdout).toBe('multipart body')

    await sbx.kill()
    await other.kill()
    expect(await Sandbox.kill(sbx.sandboxId)).toBe(false)
    expect(await Sandbox.list({ query: { metadata: { suite: scope } } }).nextItems()).toEqual([])
    expect(await scopeContainers(scope)).toEqual([])
  }, 120_000)

  test('a background command: list, stdin, kill, and wait reports the kill', async () => {
    const sbx = await Sandbox.create('base', { metadata: { suite: scope } })
    try {
      const h = await sbx.commands.run('sleep 60', { background: true })
      expect(h.pid).toBeGreaterThan(0)
      expect((await sbx.commands.list()).map((p) => p.pid)).toContain(h.pid)
      expect(await h.kill()).toBe(true)
      const ended = await h.wait().catch((e: unknown) => e)
      expect(ended).toBeInstanceOf(CommandExitError)
      expect(ended).toMatchObject({ exitCode: -1 })
      expect((await sbx.commands.list()).map((p) => p.pid)).not.toContain(h.pid)

      // The call's deadline kills the process, as envd does since March 2025.
      await expect(sbx.commands.run('sleep 30', { timeoutMs: 1_000 })).rejects.toThrow(/deadline|timeout/i)
      await expect
        .poll(async () => (await sbx.commands.list()).map((p) => p.args.join(' ')), { timeout: 10_000 })
        .not.toContain('-l -c sleep 30')

      const cat = await sbx.commands.run('cat', { background: true, stdin: true })
      await sbx.commands.sendStdin(cat.pid, 'from stdin\n')
      await sbx.commands.closeStdin(cat.pid)
      expect((await cat.wait()).stdout).toBe('from stdin\n')
    } finally {
      await sbx.kill()
    }
  }, 120_000)

  test('the filesystem RPC: exists, makeDir, list, remove', async () => {
    const sbx = await Sandbox.create('base', { metadata: { suite: scope } })
    try {
      expect(await sbx.files.exists('/tmp/nothing-here')).toBe(false)
      expect(await sbx.files.makeDir('/tmp/d/sub')).toBe(true)
      expect(await sbx.files.makeDir('/tmp/d/sub')).toBe(false)
      await sbx.files.write('/tmp/d/f.txt', 'abc')
      const entries = await sbx.files.list('/tmp/d')
      expect(entries.map((e) => [e.name, e.type, e.path])).toEqual([
        ['f.txt', 'file', '/tmp/d/f.txt'],
        ['sub', 'dir', '/tmp/d/sub'],
      ])
      expect(entries[0]).toMatchObject({ size: 3 })
      expect((await sbx.files.list('/tmp/d', { depth: 2 })).length).toBe(2)
      expect(await sbx.files.exists('/tmp/d/f.txt')).toBe(true)
      await sbx.files.remove('/tmp/d')
      expect(await sbx.files.exists('/tmp/d')).toBe(false)
    } finally {
      await sbx.kill()
    }
  }, 120_000)

  test("the base template is E2B's: home /home/user, relative paths under it, rename", async () => {
    const sbx = await Sandbox.create('base', { metadata: { suite: scope } })
    try {
      const where = await sbx.commands.run('pwd; echo $HOME; touch ~/t && echo ok')
      expect(where.stdout).toBe('/home/user\n/home/user\nok\n')
      const info = await sbx.files.write('notes/a.txt', 'abc')
      expect(info).toMatchObject({ name: 'a.txt', type: 'file', path: '/home/user/notes/a.txt' })
      expect(await sbx.files.read('/home/user/notes/a.txt')).toBe('abc')
      const moved = await sbx.files.rename('notes/a.txt', 'notes/b.txt')
      expect(moved).toMatchObject({ name: 'b.txt', type: 'file', path: '/home/user/notes/b.txt' })
      expect(await sbx.files.exists('notes/a.txt')).toBe(false)
      expect(await sbx.files.read('notes/b.txt')).toBe('abc')
      const missing = await sbx.files.rename('nothing', 'x').catch((e: unknown) => e)
      expect(String(missing)).toMatch(/nothing' does not exist/)
    } finally {
      await sbx.kill()
    }
  }, 120_000)

  test("commands and files are E2B's user `user`: whoami, owners, and a sudo that says why it cannot", async () => {
    const sbx = await Sandbox.create('base', { metadata: { suite: scope } })
    try {
      expect((await sbx.commands.run('whoami; id -gn')).stdout).toBe('user\nuser\n')
      await sbx.files.write('owned/f.txt', 'mine')
      await sbx.files.write('/tmp/t.txt', 'mine too')
      for (const path of ['/home/user/owned/f.txt', '/home/user/owned', '/tmp/t.txt'])
        expect(await sbx.files.getInfo(path)).toMatchObject({ owner: 'user', group: 'user' })
      const [entry] = await sbx.files.list('owned')
      expect(entry).toMatchObject({ name: 'f.txt', owner: 'user', group: 'user' })
      expect((await sbx.commands.run('stat -c %U:%G /home/user/owned/f.txt')).stdout).toBe('user:user\n')

      // No root inside (capabilities dropped, no-new-privileges): sudo fails, saying so.
      const sudo = await sbx.commands.run('sudo echo hi').catch((e: unknown) => e)
      expect(sudo).toBeInstanceOf(CommandExitError)
      expect(sudo).toMatchObject({ exitCode: 1, stdout: '' })
      expect((sudo as CommandExitError).stderr).toContain(
        'sudo: not available in this sandbox: it runs as user without privileges',
      )
    } finally {
      await sbx.kill()
    }
  }, 120_000)

  test('a sandbox killed while a command runs: the SDK reports it gone', async () => {
    const sbx = await Sandbox.create('base', { metadata: { suite: scope } })
    const cmd = await sbx.commands.run('sleep 60', { background: true })
    await sbx.kill()
    const err = await cmd.wait().catch((e: unknown) => e)
    expect(err).toBeInstanceOf(TimeoutError)
    expect((err as Error).message).toContain('sandbox was killed or reached its end of life')
  }, 120_000)

  test('the server policy: a block reaches the SDK as an error, a modify is applied', async () => {
    const sbx = await Sandbox.create('base', { metadata: { suite: scope } })
    try {
      await expect(sbx.commands.run('forbidden-tool --all')).rejects.toThrow(BLOCK_REASON)
      expect((await sbx.commands.run('say-old')).stdout).toBe('rewritten\n')
    } finally {
      await sbx.kill()
    }
  }, 120_000)

  test("another tenant's key neither sees nor kills nor enters the sandbox", async () => {
    const sbx = await Sandbox.create('base', { metadata: { suite: scope, owner: 'acme' } })
    try {
      const globex = { ...conn, apiKey: GLOBEX }
      expect(await Sandbox.list({ ...globex, query: { metadata: { suite: scope } } }).nextItems()).toEqual([])
      await expect(Sandbox.connect(sbx.sandboxId, globex)).rejects.toThrow(/doesn't exist|not found/i)
      await expect(Sandbox.getInfo(sbx.sandboxId, globex)).rejects.toThrow(/doesn't exist|not found/i)
      expect(await Sandbox.kill(sbx.sandboxId, globex)).toBe(false)
      expect((await sbx.commands.run('echo still here')).stdout).toBe('still here\n')
      // envd without the sandbox's access token (what create gave acme) is refused.
      const r = await fetch(`${srv.url}/files?path=/etc/hostname`, {
        headers: { 'E2b-Sandbox-Id': sbx.sandboxId },
      })
      expect(r.status).toBe(401)
    } finally {
      await sbx.kill()
    }
  }, 120_000)

  test("the tenant's sandbox quota applies to E2B creates", async () => {
    const a = await Sandbox.create('base', { metadata: { suite: scope } })
    const b = await Sandbox.create('base', { metadata: { suite: scope } })
    try {
      await a.commands.run('true')
      await b.commands.run('true')
      await expect(Sandbox.create('base', { metadata: { suite: scope } })).rejects.toThrow(
        /quota|maxSandboxes/i,
      )
    } finally {
      await a.kill()
      await b.kill()
    }
    const c = await Sandbox.create('base', { metadata: { suite: scope } })
    expect((await c.commands.run('echo room again')).stdout).toBe('room again\n')
    await c.kill()
  }, 120_000)

  test('clear errors: unknown template, bad key', async () => {
    await expect(Sandbox.create('no-such-template')).rejects.toThrow(
      /template 'no-such-template' not found; known templates: base, python, net/,
    )
    await expect(Sandbox.create('base', { apiKey: 'sbx_wrong_key_0123456789abcdef' })).rejects.toThrow(
      /Invalid API key/,
    )
  }, 120_000)

  test("a create's network rules: never more than asked nor than the profile; per-sandbox lists refused", async () => {
    const proxyOf = async (sbx: Sandbox): Promise<string> =>
      (await sbx.commands.run('echo "${HTTPS_PROXY:-none}"')).stdout.trim()
    // The template's profile reaches its allowlist through the egress proxy.
    const withNet = await Sandbox.create('net')
    expect(await proxyOf(withNet)).toBe('http://127.0.0.1:3128')
    expect((await withNet.getInfo()).allowInternetAccess).toBe(true)
    await withNet.kill()
    // allowInternetAccess: false, or all traffic denied: the sandbox has no network at all.
    for (const opts of [{ allowInternetAccess: false }, { network: { denyOut: [ALL_TRAFFIC] } }]) {
      const offline = await Sandbox.create('net', opts)
      expect(await proxyOf(offline)).toBe('none')
      expect((await offline.getInfo()).allowInternetAccess).toBe(false)
      await offline.kill()
    }
    // A profile without network stays without: less than asked, and getInfo says so.
    const asked = await Sandbox.create('base', { allowInternetAccess: true })
    expect((await asked.getInfo()).allowInternetAccess).toBe(false)
    await asked.kill()
    // Per-sandbox lists on a profile with a network would leave it more than asked: a 400 that says so.
    await expect(
      Sandbox.create('net', { network: { denyOut: [ALL_TRAFFIC], allowOut: ['example.com'] } }),
    ).rejects.toThrow(
      /network.allowOut is not supported here: .*put the destinations in the profile's network.allow/,
    )
    await expect(Sandbox.create('net', { network: { denyOut: ['10.0.0.0/8'] } })).rejects.toThrow(
      /network.denyOut \["10.0.0.0\/8"\] is not supported here/,
    )
  }, 120_000)

  test('pause freezes the sandbox in place; connect resumes it with its files and processes', async () => {
    const sbx = await Sandbox.create('base', { metadata: { suite: scope, role: 'paused' } })
    try {
      await sbx.files.write('state.txt', 'kept')
      const ticker = await sbx.commands.run('while true; do date +%s%N > /tmp/tick; sleep 0.05; done', {
        background: true,
      })
      expect(await sbx.pause()).toBe(true)
      expect(await sbx.isRunning()).toBe(false)
      // Frozen by the engine (the cgroup freezer), not stopped: nothing in it runs.
      const paused = await run('docker', [
        'ps',
        '-q',
        '--filter',
        `label=sandbox-router.scope=${scope}`,
        '--filter',
        'status=paused',
      ])
      expect(paused.stdout.trim().split('\n')).toHaveLength(1)
      expect((await Sandbox.getInfo(sbx.sandboxId)).state).toBe('paused')
      const listed = await Sandbox.list({
        query: { metadata: { suite: scope, role: 'paused' }, state: ['paused'] },
      }).nextItems()
      expect(listed.map((s) => [s.sandboxId, s.state])).toEqual([[sbx.sandboxId, 'paused']])
      expect(await sbx.pause()).toBe(false) // already paused
      // envd of a paused sandbox answers 502, as E2B's proxy does; the SDK says so in its words.
      await expect(sbx.commands.run('true')).rejects.toThrow(/not running anymore/)

      const resumed = await Sandbox.connect(sbx.sandboxId)
      expect(await resumed.isRunning()).toBe(true)
      expect((await Sandbox.getInfo(sbx.sandboxId)).state).toBe('running')
      expect(await resumed.files.read('state.txt')).toBe('kept')
      expect((await resumed.commands.list()).map((p) => p.pid)).toContain(ticker.pid)
      const t1 = (await resumed.commands.run('cat /tmp/tick')).stdout
      await expect
        .poll(async () => (await resumed.commands.run('cat /tmp/tick')).stdout, { timeout: 10_000 })
        .not.toBe(t1)
    } finally {
      await sbx.kill()
    }
    // A paused sandbox can be killed too.
    const other = await Sandbox.create('base', { metadata: { suite: scope } })
    await other.commands.run('true')
    expect(await other.pause()).toBe(true)
    expect(await Sandbox.kill(other.sandboxId)).toBe(true)
    await expect.poll(() => scopeContainers(scope, true), { timeout: 30_000 }).toEqual([])
  }, 120_000)
})
