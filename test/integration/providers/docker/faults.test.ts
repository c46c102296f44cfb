import { execFile } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'
import { afterAll, describe, expect, test } from 'vitest'
import { createDockerProvider } from '../../../../providers/docker/index.js'
import { resolveProfile } from '../../../../src/sandbox/profiles.js'
import { dockerFixture, quick, rejectionOf } from '../../../support/docker-fixture.js'

const fx = dockerFixture()

afterAll(async () => {
  expect(await fx.cleanup()).toBe(0)
})

/** Resolves once `text` appeared in the live output. */
function waitFor(text: string): { seen: Promise<void>; onStdout: (chunk: string) => void } {
  let out = ''
  let resolve!: () => void
  const seen = new Promise<void>((r) => (resolve = r))
  return {
    seen,
    onStdout: (chunk) => {
      out += chunk
      if (out.includes(text)) resolve()
    },
  }
}

describe('docker provider faults', () => {
  test('a container killed from outside mid-command gives SANDBOX_LOST promptly', async () => {
    const sb = await fx.create()
    const ready = waitFor('ready')
    const pending = sb.exec(
      { ...quick, command: 'echo ready; sleep 300', timeoutMs: 600_000 },
      { onStdout: ready.onStdout },
    )
    await ready.seen
    const lost = rejectionOf(pending)
    const killedAt = performance.now()
    await fx.provider.docker.getContainer(sb.ref.id).kill()
    expect(await lost).toMatchObject({ code: 'SANDBOX_LOST' })
    expect(performance.now() - killedAt).toBeLessThan(5_000)
    expect(await rejectionOf(sb.exec({ ...quick, command: 'echo again' }))).toMatchObject({
      code: 'SANDBOX_LOST',
    })
    expect(await rejectionOf(fx.provider.connect(sb.ref))).toMatchObject({ code: 'SANDBOX_LOST' })
    expect(await sb.health()).toMatchObject({ ok: false })
  })

  test('a fork bomb is held by the pids limit and the sandbox stays usable', async () => {
    const sb = await fx.create({ pidsLimit: 64 })
    const r = await sb.exec({ ...quick, command: ':(){ :|:& };:', timeoutMs: 3_000 })
    expect(r.timedOut || r.exitCode !== null || r.signal !== undefined).toBe(true)
    // The bomb's processes die with its command; the next command may briefly find the limit reached.
    const deadline = Date.now() + 15_000
    let last: unknown
    while (Date.now() < deadline) {
      try {
        last = await sb.exec({ ...quick, command: 'echo usable' })
        break
      } catch (err) {
        expect(err).toMatchObject({ code: 'QUOTA_EXCEEDED' })
        last = err
      }
    }
    expect(last).toMatchObject({ stdout: 'usable\n', exitCode: 0 })
    const info = await fx.provider.docker.getContainer(sb.ref.id).inspect()
    expect(info.State.Running).toBe(true)
  })

  test('the agent dying mid-command fails that command; the next call reconnects', async () => {
    const sb = await fx.create()
    expect(await rejectionOf(sb.exec({ ...quick, command: 'kill -9 $PPID; sleep 5' }))).toMatchObject({
      code: 'SANDBOX_LOST',
    })
    expect((await sb.exec({ ...quick, command: 'echo back' })).stdout).toBe('back\n')
  })

  test('closing a handle kills the commands it started; other handles keep working', async () => {
    const sb = await fx.create()
    const other = await fx.provider.connect(sb.ref)
    const ready = waitFor('ready')
    const pending = other.exec(
      { ...quick, command: 'sleep 300 & echo $! > bg.pid; echo ready; wait', timeoutMs: 600_000 },
      { onStdout: ready.onStdout },
    )
    await ready.seen
    const closed = rejectionOf(pending)
    await other.close()
    expect(await closed).toMatchObject({ code: 'SANDBOX_LOST' })
    const r = await sb.exec({
      ...quick,
      command:
        'pid=$(cat bg.pid); i=0; while kill -0 $pid 2>/dev/null && [ $i -lt 100 ]; do i=$((i+1)); sleep 0.05; done; kill -0 $pid 2>/dev/null && echo alive || echo gone',
    })
    expect(r.stdout).toBe('gone\n')
  })

  test('maxConcurrentExecs bounds the commands running at once in one handle', async () => {
    const sb = await fx.create({ maxConcurrentExecs: 2 })
    await sb.exec({ ...quick, command: 'mkdir -p running' })
    const results = await Promise.all(
      Array.from({ length: 6 }, (_, i) =>
        sb.exec({
          ...quick,
          command: `touch running/${i}; n=$(ls running | wc -l); sleep 0.2; rm running/${i}; echo $n`,
        }),
      ),
    )
    const peaks = results.map((r) => Number(r.stdout.trim()))
    expect(Math.max(...peaks)).toBeLessThanOrEqual(2)
  })

  test('a profile cwd below the workspace is created and used', async () => {
    const sb = await fx.create({ cwd: '/workspace/project/src' })
    expect((await sb.exec({ ...quick, command: 'pwd; touch made && echo ok' })).stdout).toBe(
      '/workspace/project/src\nok\n',
    )
    await sb.writeFile('rel.txt', 'x')
    expect(Buffer.from(await sb.readFile('/workspace/project/src/rel.txt')).toString()).toBe('x')
  })

  test('a missing cwd is a BAD_REQUEST naming the directory', async () => {
    const sb = await fx.create()
    const err = await rejectionOf(sb.exec({ ...quick, command: 'pwd', cwd: '/workspace/missing' }))
    expect(err).toMatchObject({ code: 'BAD_REQUEST' })
    expect((err as Error).message).toContain('/workspace/missing')
  })

  test('a missing image fails with SANDBOX_CREATE_FAILED naming the engine and how to get the image', async () => {
    const profile = resolveProfile('missing-image', {
      provider: 'docker',
      image: 'sandbox-router/does-not-exist:latest',
    })
    const err = await rejectionOf(fx.provider.create(profile, { labels: fx.labels }))
    expect(err).toMatchObject({ code: 'SANDBOX_CREATE_FAILED' })
    const message = (err as Error).message
    expect(message).toMatch(
      /^image sandbox-router\/does-not-exist:latest is not on the Docker engine at \S+;/,
    )
    expect(message).toContain('docker pull sandbox-router/does-not-exist:latest')
    expect(message).toContain('docker load')
    expect(message).not.toMatch(/runc|OCI|no such file/)
    const dev = resolveProfile('missing-dev', { provider: 'docker', image: 'sandbox-router/dev:no-such-tag' })
    const devErr = await rejectionOf(fx.provider.create(dev, { labels: fx.labels }))
    expect((devErr as Error).message).toContain('sbx image build dev')
  })

  test('connect to a container that does not exist gives SANDBOX_LOST', async () => {
    const ref = { providerId: 'docker', id: 'f'.repeat(64), profile: 'test' }
    expect(await rejectionOf(fx.provider.connect(ref))).toMatchObject({ code: 'SANDBOX_LOST' })
    await fx.provider.destroy(ref)
  })

  test('a profile for another provider is rejected', async () => {
    const profile = resolveProfile('e2b-profile', { provider: 'e2b' })
    expect(await rejectionOf(fx.provider.create(profile, { labels: fx.labels }))).toMatchObject({
      code: 'CONFIG_INVALID',
    })
  })

  test('a paused container fails exec and file calls within their deadlines instead of hanging', async () => {
    const impatient = createDockerProvider({ watchdogMs: 300, fileOpTimeoutMs: 500 })
    const sb = await impatient.create(resolveProfile('paused', { provider: 'docker' }), { labels: fx.labels })
    try {
      await fx.provider.docker.getContainer(sb.ref.id).pause()
      const started = performance.now()
      const err = await rejectionOf(sb.exec({ ...quick, command: 'echo hi', timeoutMs: 300 }))
      expect(err).toMatchObject({ code: 'SANDBOX_TIMEOUT' })
      expect(performance.now() - started).toBeLessThan(5_000)
      expect(await rejectionOf(sb.readFile('x'))).toMatchObject({ code: 'SANDBOX_LOST' })
      await fx.provider.docker.getContainer(sb.ref.id).unpause()
      expect((await sb.exec({ ...quick, command: 'echo back' })).stdout).toBe('back\n')
    } finally {
      await impatient.close()
    }
  })

  test('invalid requests are BAD_REQUEST before anything runs', async () => {
    const sb = await fx.create()
    expect(await rejectionOf(sb.exec({ ...quick, command: 'true', env: { 'A=B': 'x' } }))).toMatchObject({
      code: 'BAD_REQUEST',
    })
    expect(await rejectionOf(sb.exec({ ...quick, command: 'echo \0' }))).toMatchObject({
      code: 'BAD_REQUEST',
    })
    expect(await rejectionOf(sb.readFile(''))).toMatchObject({ code: 'BAD_REQUEST' })
    expect(await rejectionOf(sb.readFile('/workspace'))).toMatchObject({ code: 'BAD_REQUEST' })
  })

  test('network bridge is an explicit opt-out of the no-network default', async () => {
    const sb = await fx.create({ network: 'bridge' })
    const info = await fx.provider.docker.getContainer(sb.ref.id).inspect()
    expect(info.HostConfig.NetworkMode).toBe('bridge')
    expect((await sb.exec({ ...quick, command: 'ls /sys/class/net | sort | tr "\\n" " "' })).stdout).toMatch(
      /eth0/,
    )
  })

  test('an upload lands whole or not at all: written beside the file, renamed into place', async () => {
    const sb = await fx.create()
    await sb.exec({
      ...quick,
      command:
        'printf "#!/bin/sh\\necho v1\\n" > /workspace/run.sh && chmod 755 /workspace/run.sh && ' +
        'echo target > /workspace/real.txt && ln -s real.txt /workspace/link.txt',
    })
    // Over an executable: the new bytes, the old mode.
    await sb.writeFile('/workspace/run.sh', '#!/bin/sh\necho v2\n')
    expect(
      await sb.exec({ ...quick, command: '/workspace/run.sh; stat -c %a /workspace/run.sh' }),
    ).toMatchObject({
      stdout: 'v2\n755\n',
    })
    // Through a symlink: its target is written, the link stays a link.
    await sb.writeFile('/workspace/link.txt', 'through\n')
    expect(
      await sb.exec({
        ...quick,
        command: 'cat /workspace/real.txt; test -L /workspace/link.txt && echo link',
      }),
    ).toMatchObject({ stdout: 'through\nlink\n' })
    // A large file in several frames, then the listing: no part file is left.
    const big = new Uint8Array(3 * 1024 * 1024 + 5).fill(7)
    await sb.writeFile('/workspace/big.bin', big)
    // Buffer.equals, not toEqual: a deep compare of 3 MiB element by element takes minutes under load.
    const back = Buffer.from(await sb.readFile('/workspace/big.bin'))
    expect(back.length).toBe(big.length)
    expect(back.equals(big), 'the bytes read back are the bytes written').toBe(true)
    expect(await sb.exec({ ...quick, command: 'ls -A /workspace' })).toMatchObject({
      stdout: 'big.bin\nlink.txt\nreal.txt\nrun.sh\n',
    })
    // A directory in the way is refused as before, and leaves nothing.
    await sb.exec({ ...quick, command: 'mkdir /workspace/dir' })
    expect(await rejectionOf(sb.writeFile('/workspace/dir', 'x'))).toMatchObject({ code: 'BAD_REQUEST' })
    expect(await sb.exec({ ...quick, command: 'ls -A /workspace | grep -c sbx-part' })).toMatchObject({
      stdout: '0\n',
    })
  })

  test('a cancelled upload leaves the file as it was and no part file', async () => {
    const sb = await fx.create()
    await sb.exec({ ...quick, command: 'echo old > /workspace/keep.txt' })
    const big = new Uint8Array(16 * 1024 * 1024).fill(9)
    for (const when of ['during the first frame', 'between frames'] as const) {
      const ac = new AbortController()
      const upload = sb.writeFile('/workspace/keep.txt', big, { signal: ac.signal })
      if (when === 'during the first frame') ac.abort(new Error('cancelled'))
      // Between frames: the first frame has been answered once the part file exists in full.
      else {
        for (let i = 0; i < 400; i++) {
          const r = await sb.exec({
            ...quick,
            command: 'stat -c %s /workspace/.keep.txt.sbx-part-* 2>/dev/null',
          })
          if (
            r.stdout
              .trim()
              .split('\n')
              .some((n) => Number(n) >= 1024 * 1024)
          )
            break
        }
        ac.abort(new Error('cancelled'))
      }
      expect(await rejectionOf(upload), when).toBeInstanceOf(Error)
      // The discard follows the frame in flight: wait for it (bounded), never a fixed sleep.
      let parts = ''
      for (let i = 0; i < 200; i++) {
        parts = (await sb.exec({ ...quick, command: 'ls -A /workspace | grep -c sbx-part' })).stdout
        if (parts === '0\n') break
      }
      expect(parts, when).toBe('0\n')
      expect(await sb.exec({ ...quick, command: 'cat /workspace/keep.txt' }), when).toMatchObject({
        stdout: 'old\n',
      })
    }
  })

  test('another process reconnects by ref and sees the same files', async () => {
    const sb = await fx.create()
    await sb.writeFile('note.txt', 'written by the parent')
    const providerModule = fileURLToPath(new URL('../../../../providers/docker/index.ts', import.meta.url))
    const script = `
      const { createDockerProvider } = await import(${JSON.stringify(providerModule)})
      const provider = createDockerProvider()
      const sb = await provider.connect(JSON.parse(process.argv[1]))
      const r = await sb.exec({ command: 'cat note.txt; echo child > reply.txt', timeoutMs: 10000, outputCapBytes: 4096 })
      process.stdout.write(r.stdout)
      await provider.close()`
    const child = await promisify(execFile)(
      process.execPath,
      ['--import', 'tsx', '--input-type=module', '-e', script, JSON.stringify(sb.ref)],
      { timeout: 30_000 },
    )
    expect(child.stdout).toBe('written by the parent')
    expect(Buffer.from(await sb.readFile('reply.txt')).toString()).toBe('child\n')
  })
})
