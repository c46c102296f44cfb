import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { removeScopeContainers, startSbxServer, uniqueName } from '../support/sbx-cli.js'
import type { SbxServer } from '../support/sbx-cli.js'

/**
 * F7: a PUT to a FIFO used to block the session's whole file channel (60 s, then 504, and a GET
 * of another file failed with the FIFO's error). Through `sbx serve`: the PUT is a fast 400 naming
 * the path and why, and the session's other file operations carry on.
 */
describe('sbx serve: file writes to anything but a regular file', () => {
  const scope = uniqueName('f7')
  let srv: SbxServer
  beforeAll(async () => {
    srv = await startSbxServer('serve', { config: { queue: { prefix: scope } } })
  })
  afterAll(async () => {
    await srv?.stop()
    await removeScopeContainers(scope)
  })

  const put = (path: string, body: string) =>
    srv.fetch(`/v1/sessions/f7/files?path=${encodeURIComponent(path)}`, {
      method: 'PUT',
      body,
      headers: { 'content-type': 'application/octet-stream' },
      // Well past "fast", well before the old 60 s hang: a regression fails here, not at the test timeout.
      signal: AbortSignal.timeout(20_000),
    })

  test('a PUT to a FIFO is a fast 400 and a GET of another file right after works', async () => {
    expect((await srv.post('/v1/sessions', { id: 'f7' })).status).toBe(201)
    const setup = await srv.post('/v1/exec', {
      provider: 'docker',
      profile: 'default',
      sessionId: 'f7',
      command: 'mkfifo /workspace/fifo && echo other > /workspace/other.txt && ls -l /workspace/fifo',
    })
    const job = (await setup.json()) as { state: string; result?: { exitCode: number; stdout: string } }
    expect(job.state).toBe('completed')
    expect(job.result?.stdout).toMatch(/^p/) // a FIFO

    const started = performance.now()
    const res = await put('/workspace/fifo', 'X')
    const ms = performance.now() - started
    expect(res.status).toBe(400)
    const body = (await res.json()) as { error: { code: string; message: string } }
    expect(body.error.code).toBe('BAD_REQUEST')
    expect(body.error.message).toContain('/workspace/fifo')
    expect(body.error.message).toMatch(/FIFO.*not a regular file/)
    expect(ms).toBeLessThan(5_000)
    console.log(`[figure] PUT to a FIFO: 400 in ${Math.round(ms)} ms`)

    const got = await srv.fetch('/v1/sessions/f7/files?path=/workspace/other.txt', {
      signal: AbortSignal.timeout(20_000),
    })
    expect(got.status).toBe(200)
    expect(await got.text()).toBe('other\n')
    // The FIFO is still a FIFO: nothing replaced it with a regular file.
    const check = await srv.post('/v1/exec', {
      provider: 'docker',
      profile: 'default',
      sessionId: 'f7',
      command: 'test -p /workspace/fifo && echo still-fifo',
    })
    expect(((await check.json()) as { result?: { stdout: string } }).result?.stdout).toBe('still-fifo\n')
  })

  test('a PUT to a device or a directory is a 400 naming it; a new path and a regular file still work', async () => {
    const dev = await put('/dev/null', 'X')
    expect(dev.status).toBe(400)
    expect(((await dev.json()) as { error: { message: string } }).error.message).toMatch(
      /\/dev\/null.*character device, not a regular file/,
    )
    const dir = await put('/workspace', 'X')
    expect(dir.status).toBe(400)
    expect(((await dir.json()) as { error: { message: string } }).error.message).toMatch(
      /\/workspace .*directory, not a regular file/,
    )
    expect((await put('/workspace/new/dir/file.txt', 'fresh')).status).toBe(200)
    expect((await put('/workspace/other.txt', 'replaced')).status).toBe(200)
    const got = await srv.fetch('/v1/sessions/f7/files?path=/workspace/new/dir/file.txt')
    expect(await got.text()).toBe('fresh')
    const other = await srv.fetch('/v1/sessions/f7/files?path=/workspace/other.txt')
    expect(await other.text()).toBe('replaced')
  })
})
