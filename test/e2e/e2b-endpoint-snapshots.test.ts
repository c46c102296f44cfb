import { Sandbox, SandboxError, SandboxNotFoundError } from 'e2b'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { e2bServe } from '../support/e2b-serve.js'
import type { SbxServer } from '../support/sbx-cli.js'

const ACME = `acme_e2bsnap_${'a'.repeat(24)}`
const GLOBEX = `globex_e2bsnap_${'g'.repeat(24)}`

/**
 * E2B's snapshots and forks on the E2B-compatible endpoint of `node bin/sbx.js serve`, driven by the
 * real `e2b` SDK: a snapshot keeps the sandbox's files (its home and /tmp, in-memory mounts of the
 * built-in `e2b` profile), sandboxes start from it by id or name, a fork copies a sandbox, and the
 * snapshots are the tenant's own records of the server's snapshot store (`/v1/snapshots`).
 */
describe('E2B snapshots and fork through sbx serve (e2b SDK)', () => {
  const e2b = e2bServe('e2bsnap')
  const { scope } = e2b
  let srv: SbxServer
  const globex = () => ({ apiKey: GLOBEX })

  beforeAll(async () => {
    srv = await e2b.start({
      config: {
        apiKeys: [
          { keyEnv: 'E2BSNAP_ACME_KEY', tenant: 'acme' },
          { keyEnv: 'E2BSNAP_GLOBEX_KEY', tenant: 'globex' },
        ],
        // `remote`: a template on the Daytona provider, which has no snapshots (never reached here).
        e2b: { templates: { base: 'e2b', remote: 'remote' } },
        profiles: { remote: { provider: 'daytona' } },
        quotas: { requestsPerSecond: 1000 },
      },
      env: {
        SBX_API_KEY: ACME,
        E2BSNAP_ACME_KEY: ACME,
        E2BSNAP_GLOBEX_KEY: GLOBEX,
        DAYTONA_API_KEY: 'daytona_unused',
        DAYTONA_API_URL: 'http://127.0.0.1:9',
      },
      key: ACME,
    })
  }, 180_000)

  afterAll(() => e2b.stop(), 120_000)

  test('snapshot, create from it (by id and by name), files kept, copies independent, list, delete', async () => {
    const sbx = await Sandbox.create('base', { metadata: { suite: scope } })
    const copies: Sandbox[] = []
    try {
      await sbx.files.makeDir('/home/user/app')
      await sbx.files.write('/home/user/app/config.json', '{"env":"test"}')
      await sbx.commands.run('echo scratch > /tmp/scratch.txt && echo relative > notes.txt')

      const name = `${scope}-named`
      const snap = await sbx.createSnapshot({ name })
      expect(snap.snapshotId).toMatch(/^snap-/)
      expect(snap.names).toEqual([name])

      // Listed for its sandbox, by name, and not under an unknown name.
      const mine = await sbx.listSnapshots().nextItems()
      expect(mine.map((s) => s.snapshotId)).toEqual([snap.snapshotId])
      expect((await Sandbox.listSnapshots({ name }).nextItems()).map((s) => s.snapshotId)).toEqual([
        snap.snapshotId,
      ])
      expect(await Sandbox.listSnapshots({ name: `${name}-nope` }).nextItems()).toEqual([])
      // The same record as the server's own snapshot API shows.
      const v1 = (await (await srv.fetch(`/v1/snapshots/${snap.snapshotId}`)).json()) as Record<
        string,
        unknown
      >
      expect(v1).toMatchObject({ id: snap.snapshotId, sessionId: sbx.sandboxId, state: 'ready', name })

      const byId = await Sandbox.create(snap.snapshotId)
      copies.push(byId)
      const byName = await Sandbox.create(name)
      copies.push(byName)
      for (const copy of [byId, byName]) {
        expect(copy.sandboxId).not.toBe(sbx.sandboxId)
        expect(await copy.files.read('/home/user/app/config.json')).toBe('{"env":"test"}')
        expect(await copy.files.read('/tmp/scratch.txt')).toBe('scratch\n')
        expect((await copy.commands.run('cat notes.txt; pwd; whoami')).stdout).toBe(
          'relative\n/home/user\nuser\n',
        )
        // The agent's own files of the source (its process records) are not carried over.
        expect((await copy.commands.list()).length).toBe(0)
      }
      await byId.files.write('/home/user/app/config.json', 'changed')
      expect(await byName.files.read('/home/user/app/config.json')).toBe('{"env":"test"}')
      expect(await sbx.files.read('/home/user/app/config.json')).toBe('{"env":"test"}')

      expect(await Sandbox.deleteSnapshot(snap.snapshotId)).toBe(true)
      expect(await Sandbox.deleteSnapshot(snap.snapshotId)).toBe(false)
      expect(await sbx.listSnapshots().nextItems()).toEqual([])
      // A sandbox made from it keeps its own copy.
      expect(await byName.files.read('/home/user/app/config.json')).toBe('{"env":"test"}')
      await expect(Sandbox.create(snap.snapshotId)).rejects.toThrow(/not found/)
    } finally {
      await Promise.all([sbx, ...copies].map((s) => s.kill()))
    }
  })

  test('fork: copies of a running sandbox, each on its own; the source keeps running; no snapshot left', async () => {
    const sbx = await Sandbox.create('base', { metadata: { suite: scope, role: 'source' } })
    try {
      await sbx.files.write('/home/user/state.txt', 'before fork')
      const forks = await sbx.fork({ count: 2, timeoutMs: 60_000 })
      expect(forks).toHaveLength(2)
      const made = forks.filter((f): f is Sandbox => f instanceof Sandbox)
      try {
        expect(made).toHaveLength(2)
        expect(new Set(made.map((f) => f.sandboxId)).size).toBe(2)
        for (const f of made) {
          expect(await f.files.read('/home/user/state.txt')).toBe('before fork')
          // A fork keeps the source's metadata, as E2B's does.
          expect((await f.getInfo()).metadata).toMatchObject({ suite: scope, role: 'source' })
        }
        await made[0]!.files.write('/home/user/state.txt', 'in fork 0')
        expect(await made[1]!.files.read('/home/user/state.txt')).toBe('before fork')
        expect(await sbx.files.read('/home/user/state.txt')).toBe('before fork')
        expect(await sbx.isRunning()).toBe(true)
        expect(await sbx.listSnapshots().nextItems()).toEqual([])

        // The static form, by id.
        const [byId] = await Sandbox.fork(sbx.sandboxId)
        expect(byId).toBeInstanceOf(Sandbox)
        if (byId instanceof Sandbox) made.push(byId)
      } finally {
        await Promise.all(made.map((f) => f.kill()))
      }

      // A count below 1 is E2B's 400, naming the field.
      const bad = await Sandbox.fork(sbx.sandboxId, { count: 0 }).catch((e: unknown) => e)
      expect(bad).toBeInstanceOf(SandboxError)
      expect((bad as SandboxError).message).toMatch(/^400: count must be an integer from 1 to 100/)
    } finally {
      await sbx.kill()
    }
  })

  test("another tenant neither lists, uses, deletes nor takes the tenant's snapshots", async () => {
    const sbx = await Sandbox.create('base')
    try {
      await sbx.files.write('/home/user/secret.txt', 'acme only')
      const snap = await sbx.createSnapshot({ name: `${scope}-private` })
      expect(await Sandbox.listSnapshots(globex()).nextItems()).toEqual([])
      await expect(Sandbox.create(snap.snapshotId, globex())).rejects.toThrow(/template '.*' not found/)
      await expect(Sandbox.create(`${scope}-private`, globex())).rejects.toThrow(/not found/)
      expect(await Sandbox.deleteSnapshot(snap.snapshotId, globex())).toBe(false)
      await expect(Sandbox.createSnapshot(sbx.sandboxId, globex())).rejects.toThrow(SandboxNotFoundError)
      await expect(Sandbox.fork(sbx.sandboxId, globex())).rejects.toThrow(SandboxNotFoundError)
      expect((await srv.fetch(`/v1/snapshots/${snap.snapshotId}`, { key: GLOBEX })).status).toBe(404)
      // Still there for its owner.
      expect((await Sandbox.listSnapshots().nextItems()).map((s) => s.snapshotId)).toContain(snap.snapshotId)
      expect(await Sandbox.deleteSnapshot(snap.snapshotId)).toBe(true)
    } finally {
      await sbx.kill()
    }
  })

  test('a template whose provider cannot snapshot answers 501 saying so', async () => {
    // The Daytona provider's session holds no sandbox until its first call: nothing remote is reached.
    const sbx = await Sandbox.create('remote')
    try {
      const err = await sbx.createSnapshot().catch((e: unknown) => e)
      expect(err).toBeInstanceOf(SandboxError)
      expect((err as SandboxError).message).toMatch(/^501: provider 'daytona' has no snapshots/)
      await expect(sbx.fork()).rejects.toThrow(/^501: provider 'daytona' has no snapshots/)
    } finally {
      await sbx.kill()
    }
  })
})
