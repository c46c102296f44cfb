import { CommandExitError, Sandbox } from 'e2b'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { type E2BEndpoint, startE2BEndpoint } from '../support/e2b-endpoint.js'
import { type SbxServer, removeScope, startSbxServer, uniqueName } from '../support/sbx-cli.js'

/**
 * E2B → us → E2B: the `e2b` SDK talks to an outer `node bin/sbx.js serve` whose `base` template is a
 * profile of the E2B provider, and that provider's E2B is an inner `sbx serve` (E2B's `base` on
 * Docker). What the SDK sees through the chain is what it sees from one endpoint: the router in the
 * middle is transparent.
 */
describe('E2B → sbx serve (E2B provider) → sbx serve (Docker)', () => {
  const scope = uniqueName('e2bchain')
  let inner: E2BEndpoint
  let outer: SbxServer
  let conn: { apiKey: string; apiUrl: string; sandboxUrl: string }

  beforeAll(async () => {
    inner = await startE2BEndpoint({ tag: 'e2bchain-in' })
    outer = await startSbxServer('serve', {
      config: {
        queue: { prefix: scope },
        quotas: { requestsPerSecond: 1000 },
        // E2B's base, one hop further: the inner endpoint's `base`, in the user's home.
        profiles: { chained: { provider: 'e2b', template: 'base', cwd: '/home/user' } },
        e2b: { templates: { base: 'chained' } },
      },
      env: {
        E2B_API_KEY: inner.apiKey,
        E2B_API_URL: inner.apiUrl,
        E2B_SANDBOX_URL: inner.sandboxUrl,
        SBX_E2B_PREVIEW_URL: inner.previewUrl,
      },
    })
    conn = { apiKey: outer.key, apiUrl: outer.url, sandboxUrl: outer.url }
  }, 180_000)

  afterAll(async () => {
    await outer?.stop()
    await removeScope(scope)
    // The outer server destroyed its sandboxes at the inner endpoint when it stopped.
    expect(await inner?.sandboxIds()).toEqual([])
    expect(await inner?.close()).toBe(0)
  }, 120_000)

  test('commands, files, a killed process and list pass through both endpoints unchanged', async () => {
    const sbx = await Sandbox.create('base', { ...conn, metadata: { suite: scope } })
    expect(await sbx.commands.run('echo hi')).toMatchObject({ stdout: 'hi\n', stderr: '', exitCode: 0 })
    // One sandbox at the inner endpoint, made by the outer one's E2B provider (at the first call,
    // when the outer session binds its sandbox).
    const [innerId] = await inner.sandboxIds()
    expect(innerId).toBeDefined()
    expect((await inner.info(innerId ?? ''))?.metadata).toMatchObject({
      'sandbox-router.owner': 'sandbox-router',
    })
    const failed = await sbx.commands.run('echo out; echo err >&2; exit 3').catch((e: unknown) => e)
    expect(failed).toBeInstanceOf(CommandExitError)
    expect(failed).toMatchObject({ exitCode: 3, stdout: 'out\n', stderr: 'err\n' })
    expect((await sbx.commands.run('whoami; pwd')).stdout).toBe('user\n/home/user\n')

    await sbx.files.write('/tmp/chain.txt', 'through two routers')
    expect(await sbx.files.read('/tmp/chain.txt')).toBe('through two routers')
    expect(await sbx.files.write('rel.txt', 'relative')).toMatchObject({ path: '/home/user/rel.txt' })
    expect((await sbx.commands.run('cat /tmp/chain.txt rel.txt')).stdout).toBe('through two routersrelative')
    // The inner endpoint served the file write (it reached the Docker sandbox behind it).
    expect(inner.requests.some((r) => r.path === '/process.Process/Start' && r.sandboxId === innerId)).toBe(
      true,
    )

    const sleeper = await sbx.commands.run('sleep 60', { background: true })
    expect((await sbx.commands.list()).map((p) => p.pid)).toContain(sleeper.pid)
    expect(await sbx.commands.kill(sleeper.pid)).toBe(true)
    const killed = await sleeper.wait().catch((e: unknown) => e)
    expect(killed).toBeInstanceOf(CommandExitError)
    expect(killed).toMatchObject({ exitCode: -1, error: 'signal: killed' })
    expect((await sbx.commands.list()).map((p) => p.pid)).not.toContain(sleeper.pid)

    const listed = await Sandbox.list({ ...conn, query: { metadata: { suite: scope } } }).nextItems()
    expect(listed.map((s) => s.sandboxId)).toEqual([sbx.sandboxId])
    expect(listed[0]).toMatchObject({ templateId: 'base', state: 'running', metadata: { suite: scope } })

    await sbx.kill()
    expect(await Sandbox.list({ ...conn, query: { metadata: { suite: scope } } }).nextItems()).toEqual([])
    // Killing the outer sandbox destroyed the inner one.
    expect(await inner.sandboxIds()).toEqual([])
  }, 180_000)

  test('snapshots and forks pass through: E2B holds them, copies have the files, delete reaches E2B', async () => {
    const innerConn = { apiKey: inner.apiKey, apiUrl: inner.apiUrl, sandboxUrl: inner.sandboxUrl }
    const innerSnapshots = async () => Sandbox.listSnapshots(innerConn).nextItems()
    const providers = (await (await outer.fetch('/v1/providers')).json()) as {
      providers: { id: string; workspaces: unknown }[]
    }
    expect(providers.providers.find((p) => p.id === 'e2b')?.workspaces).toEqual({
      persistent: false,
      snapshots: true,
      fork: true,
    })
    const sbx = await Sandbox.create('base', { ...conn, metadata: { suite: scope } })
    await sbx.files.write('/home/user/state.txt', 'at the snapshot')
    const snap = await sbx.createSnapshot({ name: `${scope}-snap` })
    // The outer snapshot is an E2B snapshot at the inner endpoint, named after the outer one.
    expect((await innerSnapshots()).map((s) => s.names)).toEqual([[snap.snapshotId]])
    await sbx.files.write('/home/user/state.txt', 'at the fork')

    const copy = await Sandbox.create(`${scope}-snap`, conn)
    expect(await copy.files.read('/home/user/state.txt')).toBe('at the snapshot')
    const forks = await sbx.fork({ count: 2 })
    expect(forks).toHaveLength(2)
    for (const fork of forks) {
      if (!(fork instanceof Sandbox)) throw new Error(`fork failed: ${JSON.stringify(fork)}`)
      expect(await fork.files.read('/home/user/state.txt')).toBe('at the fork')
      expect((await fork.commands.run('whoami; pwd')).stdout).toBe('user\n/home/user\n')
    }
    // Each copy has its own files.
    await copy.files.write('/home/user/state.txt', 'changed in the copy')
    expect(await sbx.files.read('/home/user/state.txt')).toBe('at the fork')
    // A fork keeps no snapshot; deleting the named one deletes E2B's.
    expect((await innerSnapshots()).map((s) => s.names)).toEqual([[snap.snapshotId]])
    expect(await Sandbox.deleteSnapshot(snap.snapshotId, conn)).toBe(true)
    expect(await innerSnapshots()).toEqual([])
    expect(await copy.files.read('/home/user/state.txt')).toBe('changed in the copy')

    await Promise.all([sbx, copy, ...forks].map((s) => (s instanceof Sandbox ? s.kill() : undefined)))
    expect(await inner.sandboxIds()).toEqual([])
  }, 180_000)

  test('a PTY: output, input, resize, exit and kill pass through to a PTY at the inner endpoint', async () => {
    const sbx = await Sandbox.create('base', { ...conn, metadata: { suite: scope } })
    let output = ''
    const waiters: { pattern: RegExp; resolve: () => void }[] = []
    const seen = (pattern: RegExp): Promise<void> =>
      new Promise((resolve) => {
        if (pattern.test(output)) resolve()
        else waiters.push({ pattern, resolve })
      })
    const decoder = new TextDecoder()
    const onData = (data: Uint8Array): void => {
      output += decoder.decode(data, { stream: true })
      for (const w of waiters.filter((w) => w.pattern.test(output))) {
        waiters.splice(waiters.indexOf(w), 1)
        w.resolve()
      }
    }
    const input = (text: string): Uint8Array => new TextEncoder().encode(text)

    const terminal = await sbx.pty.create({ cols: 80, rows: 24, envs: { CHAIN_VAR: 'chained' }, onData })
    const innerId = (await inner.sandboxIds())[0] ?? ''
    await sbx.pty.sendInput(terminal.pid, input('echo "$CHAIN_VAR-$((2+3)) $(stty size) pid=$$"\n'))
    await seen(new RegExp(`chained-5 24 80 pid=${terminal.pid}`))
    await sbx.pty.resize(terminal.pid, { cols: 120, rows: 40 })
    await sbx.pty.sendInput(terminal.pid, input('echo "size=$(stty size)"; exit 4\n'))
    const ended = await terminal.wait().catch((e: unknown) => e)
    expect(ended).toMatchObject({ exitCode: 4 })
    expect(output).toContain('size=40 120')
    // The PTY at the inner endpoint (the outer E2B provider's) got the resize before the input after it.
    expect(inner.requests.some((r) => r.path === '/process.Process/Update' && r.sandboxId === innerId)).toBe(
      true,
    )

    const second = await sbx.pty.create({ cols: 80, rows: 24, onData })
    expect(await sbx.pty.kill(second.pid)).toBe(true)
    expect(await second.wait().catch((e: unknown) => e)).toMatchObject({
      exitCode: -1,
      error: 'signal: killed',
    })
    await expect(sbx.commands.run(`kill -0 ${second.pid}`)).rejects.toBeInstanceOf(CommandExitError)
    await sbx.kill()
  }, 180_000)
})
