import {
  FileNotFoundError,
  FileType,
  FilesystemEventType,
  InvalidArgumentError,
  Sandbox,
  type FilesystemEvent,
} from 'e2b'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { type E2BConnection, e2bServe } from '../support/e2b-serve.js'

const ACME = `acme_e2bf_${'a'.repeat(24)}`
const GLOBEX = `globex_e2bf_${'g'.repeat(24)}`

/** Collects a watch's events and resolves waits for the first event that matches. */
function eventLog() {
  const seen: FilesystemEvent[] = []
  const waits: { match: (e: FilesystemEvent) => boolean; resolve: (e: FilesystemEvent) => void }[] = []
  return {
    onEvent(e: FilesystemEvent): void {
      seen.push(e)
      for (const w of waits.filter((x) => x.match(e))) {
        waits.splice(waits.indexOf(w), 1)
        w.resolve(e)
      }
    },
    /** The first event (already seen or still to come) with this type and name. */
    next(type: FilesystemEventType, name: string): Promise<FilesystemEvent> {
      const match = (e: FilesystemEvent): boolean => e.type === type && e.name === name
      const found = seen.find(match)
      if (found) return Promise.resolve(found)
      return new Promise((resolve) => waits.push({ match, resolve }))
    },
  }
}

/**
 * The E2B endpoint's file fidelity through `node bin/sbx.js serve` and the real `e2b` SDK: directory
 * watches (the agent's inotify watch in the sandbox), file metadata (extended attributes), symlink
 * targets, and signed `/files` URLs (`downloadUrl` / `uploadUrl`) across tenants.
 */
describe('E2B endpoint files: watchDir, metadata, symlinks, signed URLs (e2b SDK)', () => {
  const e2b = e2bServe('e2bfiles')
  const { scope } = e2b
  let conn: E2BConnection

  beforeAll(async () => {
    await e2b.start({
      config: {
        apiKeys: [
          { keyEnv: 'E2BF_ACME_KEY', tenant: 'acme' },
          { keyEnv: 'E2BF_GLOBEX_KEY', tenant: 'globex' },
        ],
        quotas: { requestsPerSecond: 1000 },
      },
      env: { SBX_API_KEY: ACME, E2BF_ACME_KEY: ACME, E2BF_GLOBEX_KEY: GLOBEX },
      key: ACME,
    })
    conn = e2b.conn
  }, 180_000)

  afterAll(() => e2b.stop(), 120_000)

  test('watchDir: writes, a folder added later (recursive), removes, entry info; a missing dir or a file is refused', async () => {
    const sbx = await Sandbox.create('base', { metadata: { suite: scope } })
    try {
      await sbx.files.makeDir('w')
      const log = eventLog()
      const handle = await sbx.files.watchDir('w', (e) => log.onEvent(e), {
        recursive: true,
        includeEntry: true,
      })
      await sbx.files.write('w/a.txt', 'one')
      const write = await log.next(FilesystemEventType.WRITE, 'a.txt')
      expect(write.entry).toMatchObject({
        name: 'a.txt',
        path: '/home/user/w/a.txt',
        type: FileType.FILE,
        size: 3,
      })

      // A folder made after the watch began is watched too, before its create event arrives.
      await sbx.files.makeDir('w/n')
      await log.next(FilesystemEventType.CREATE, 'n')
      await sbx.files.write('w/n/b.txt', 'two')
      await log.next(FilesystemEventType.WRITE, 'n/b.txt')

      // Changes made by commands in the sandbox are seen as well.
      await sbx.commands.run('chmod 600 w/a.txt && mv w/n/b.txt w/n/c.txt && rm w/a.txt')
      await log.next(FilesystemEventType.CHMOD, 'a.txt')
      await log.next(FilesystemEventType.RENAME, 'n/b.txt')
      await log.next(FilesystemEventType.CREATE, 'n/c.txt')
      const removed = await log.next(FilesystemEventType.REMOVE, 'a.txt')
      expect(removed.entry).toBeUndefined() // gone: no entry, as envd
      await handle.stop()

      await expect(sbx.files.watchDir('nope', () => undefined)).rejects.toBeInstanceOf(FileNotFoundError)
      await sbx.files.write('plain.txt', 'x')
      await expect(sbx.files.watchDir('plain.txt', () => undefined)).rejects.toThrow(/not a directory/)
    } finally {
      await sbx.kill()
    }
  }, 120_000)

  test('metadata: stored on write, surfaced by getInfo, list and rename, replaced by an overwrite; symlink targets', async () => {
    const sbx = await Sandbox.create('base', { metadata: { suite: scope } })
    try {
      const metadata = { author: 'mish', purpose: 'upload' }
      const info = await sbx.files.write('m/a.txt', 'x', { metadata })
      expect(info.metadata).toEqual(metadata)
      expect((await sbx.files.getInfo('m/a.txt')).metadata).toEqual(metadata)
      // The octet-stream upload carries it too, and a multi-file upload puts it on each file.
      await sbx.files.write('m/b.txt', 'y', { metadata: { tag: 'octet' }, useOctetStream: true })
      const many = await sbx.files.writeFiles(
        [
          { path: 'm/c.txt', data: '1' },
          { path: 'm/d.txt', data: '2' },
        ],
        { metadata: { batch: '1' } },
      )
      expect(many.map((w) => w.metadata)).toEqual([{ batch: '1' }, { batch: '1' }])
      const listed = Object.fromEntries((await sbx.files.list('m')).map((e) => [e.name, e.metadata]))
      expect(listed).toEqual({
        'a.txt': metadata,
        'b.txt': { tag: 'octet' },
        'c.txt': { batch: '1' },
        'd.txt': { batch: '1' },
      })
      expect((await sbx.files.rename('m/a.txt', 'm/e.txt')).metadata).toEqual(metadata)

      // An overwrite without metadata leaves none (as envd: each upload replaces it).
      expect((await sbx.files.write('m/e.txt', 'z')).metadata).toBeUndefined()
      expect((await sbx.files.getInfo('m/e.txt')).metadata).toBeUndefined()

      // Bad metadata is the SDK's InvalidArgumentError, and writes nothing.
      await expect(
        sbx.files.write('m/bad.txt', 'x', { metadata: { 'bad key': 'v' } }),
      ).rejects.toBeInstanceOf(InvalidArgumentError)
      expect(await sbx.files.exists('m/bad.txt')).toBe(false)

      await sbx.commands.run('ln -s m/b.txt link && ln -s /nowhere dangling')
      expect((await sbx.files.getInfo('link')).symlinkTarget).toBe('/home/user/m/b.txt')
      expect((await sbx.files.getInfo('dangling')).symlinkTarget).toBe('/nowhere')
    } finally {
      await sbx.kill()
    }
  }, 120_000)

  test('signed URLs: a download and an upload without the access token; expired, forged and misused ones are 401', async () => {
    const sbx = await Sandbox.create('base', { metadata: { suite: scope }, secure: true })
    try {
      await sbx.files.write('hello.txt', 'hello world')
      const url = await sbx.downloadUrl('hello.txt', { useSignatureExpiration: 60 })
      const ok = await fetch(url)
      expect([ok.status, await ok.text()]).toEqual([200, 'hello world'])
      // Without an expiration the URL does not expire (secure.test's form).
      expect(await (await fetch(await sbx.downloadUrl('hello.txt'))).text()).toBe('hello world')

      const expired = await fetch(await sbx.downloadUrl('hello.txt', { useSignatureExpiration: -10 }))
      expect([expired.status, await expired.json()]).toEqual([
        401,
        { code: 401, message: 'signature is already expired' },
      ])
      const forged = new URL(url)
      forged.searchParams.set('path', '/etc/passwd') // the signature covers the path
      const f = await fetch(forged)
      expect([f.status, await f.json()]).toEqual([401, { code: 401, message: 'invalid signature' }])
      // A read signature opens no upload.
      const misused = await fetch(url, { method: 'POST', body: new FormData() })
      expect(misused.status).toBe(401)

      const upload = await sbx.uploadUrl('up.txt', { useSignatureExpiration: 60 })
      const form = new FormData()
      form.append('file', 'uploaded')
      const up = await fetch(upload, { method: 'POST', body: form })
      expect([up.status, await up.json()]).toEqual([
        200,
        [{ name: 'up.txt', path: '/home/user/up.txt', type: 'file' }],
      ])
      expect(await sbx.files.read('up.txt')).toBe('uploaded')
    } finally {
      await sbx.kill()
    }
  }, 120_000)

  test("a URL signed for one tenant's sandbox opens nothing of another's", async () => {
    const mine = await Sandbox.create('base', { metadata: { suite: scope }, secure: true })
    const theirs = await Sandbox.create('base', { ...conn, apiKey: GLOBEX, secure: true })
    try {
      await mine.files.write('hello.txt', 'acme data')
      await theirs.files.write('hello.txt', 'globex data')
      // globex's own URL reads globex's file: the signature names the sandbox whose token made it.
      const url = await theirs.downloadUrl('hello.txt', { useSignatureExpiration: 60 })
      expect(await (await fetch(url)).text()).toBe('globex data')
      // acme's URL names acme's sandbox, with or without its id in the header.
      const own = await mine.downloadUrl('hello.txt', { useSignatureExpiration: 60 })
      expect(await (await fetch(own, { headers: { 'E2b-Sandbox-Id': mine.sandboxId } })).text()).toBe(
        'acme data',
      )
      // Aimed at acme's sandbox (its id in the header envd calls carry), with or without globex's
      // API key, it is refused: acme's token did not sign it.
      const attempts: Record<string, string>[] = [
        { 'E2b-Sandbox-Id': mine.sandboxId },
        { 'E2b-Sandbox-Id': mine.sandboxId, 'X-API-Key': GLOBEX },
      ]
      for (const headers of attempts) {
        const r = await fetch(url, { headers })
        expect([r.status, await r.json()]).toEqual([401, { code: 401, message: 'invalid signature' }])
      }
      // A signature made up by someone without any sandbox's token matches none.
      const guessed = new URL(url)
      guessed.searchParams.set('signature', 'v1_' + 'A'.repeat(43))
      expect((await fetch(guessed)).status).toBe(401)
    } finally {
      await mine.kill()
      await theirs.kill()
    }
  }, 120_000)

  // Last in the file: it spends this client's allowance of URLs that name no sandbox.
  test('guessing signatures of URLs that name no sandbox is rate-limited; a named sandbox is not', async () => {
    const sbx = await Sandbox.create('base', { metadata: { suite: scope }, secure: true })
    try {
      await sbx.files.write('hello.txt', 'named')
      const url = new URL(await sbx.downloadUrl('hello.txt', { useSignatureExpiration: 60 }))
      const guesses = Array.from({ length: 60 }, (_, i) => {
        const u = new URL(url)
        u.searchParams.set('signature', 'v1_' + String(i).padStart(43, 'A'))
        return fetch(u)
      })
      const answers = await Promise.all(guesses)
      const statuses = answers.map((r) => r.status)
      expect(statuses.filter((st) => st === 401).length).toBeGreaterThan(0)
      const limited = answers.filter((r) => r.status === 429)
      expect(limited.length).toBeGreaterThan(0)
      expect(Number(limited[0]?.headers.get('retry-after'))).toBeGreaterThanOrEqual(1)
      expect((await limited[0]?.json()) as unknown).toMatchObject({
        code: 429,
        message: expect.stringMatching(/name no sandbox.*E2b-Sandbox-Id/),
      })
      // The same URL naming its sandbox needs no lookup, and is served.
      const named = await fetch(url, { headers: { 'E2b-Sandbox-Id': sbx.sandboxId } })
      expect([named.status, await named.text()]).toEqual([200, 'named'])
    } finally {
      await sbx.kill()
    }
  }, 120_000)
})
