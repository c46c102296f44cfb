import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { plainImage } from '../support/plain-images.js'
import { removeScopeContainers, startSbxServer, uniqueName } from '../support/sbx-cli.js'
import type { SbxServer } from '../support/sbx-cli.js'

interface JobAnswer {
  state?: string
  result?: { exitCode: number | null; stdout: string; stderr: string }
  error?: { code: string; message: string }
}
interface ToolCallAnswer {
  output: string
  result?: { exitCode: number | null; stdout: string }
}

/**
 * Issue 13, "any image": `node bin/sbx.js serve` with profiles naming images made here without the
 * agent (busybox without bash; a Debian minbase rootfs with no user 1000), each with an ENTRYPOINT,
 * CMD, WORKDIR and USER of its own. Commands run in them through the public HTTP API; the image
 * without bash runs everything with /bin/sh and says clearly that the persistent shell needs bash;
 * an image the engine lacks is an error naming the engine and how to get it.
 */
describe('any image through sbx serve', () => {
  const scope = uniqueName('anyimg')
  let srv: SbxServer

  beforeAll(async () => {
    const busybox = plainImage('busybox')
    const debian = plainImage('debian')
    srv = await startSbxServer('serve', {
      config: {
        queue: { prefix: scope },
        profiles: {
          'plain-busybox': { provider: 'docker', image: busybox },
          'plain-debian': { provider: 'docker', image: debian },
          missing: { provider: 'docker', image: 'sandbox-router/not-built-here:1' },
        },
        // Tool calls (an agent's bash) go to the image without bash.
        routing: { shell: { providerId: 'docker', profile: 'plain-busybox' } },
      },
    })
  }, 300_000)

  afterAll(async () => {
    await srv?.stop()
    await removeScopeContainers(scope)
  }, 60_000)

  const exec = async (profile: string, body: Record<string, unknown>): Promise<JobAnswer> => {
    const res = await srv.post('/v1/exec', { provider: 'docker', profile, ...body })
    return (await res.json()) as JobAnswer
  }

  test('busybox without bash or agent: commands run with /bin/sh as the profile user in /workspace', async () => {
    const r = await exec('plain-busybox', {
      sessionId: 'bb',
      command:
        'echo hi > a.txt; cat a.txt; id -u; pwd; [ -e /bin/bash ] && echo bash || echo no-bash; echo $PLAIN_IMAGE',
    })
    expect(r.state, JSON.stringify(r)).toBe('completed')
    expect(r.result).toMatchObject({ exitCode: 0, stdout: 'hi\n1000\n/workspace\nno-bash\nyes\n' })
    // The session keeps its sandbox: the file is still there.
    const again = await exec('plain-busybox', { sessionId: 'bb', command: 'cat a.txt' })
    expect(again.result?.stdout).toBe('hi\n')
  }, 120_000)

  test('busybox: a persistent-shell call says bash is missing and to run it fresh; tool calls run fresh', async () => {
    const r = await exec('plain-busybox', { sessionId: 'bb-shell', command: 'pwd', shell: 'persistent' })
    expect(r.error?.code, JSON.stringify(r)).toBe('BAD_REQUEST')
    expect(r.error?.message).toMatch(
      /no \/bin\/bash, which the persistent shell needs.*shell: 'fresh'.*\/bin\/sh/,
    )
    // An agent's bash tool call works anyway: it runs fresh there.
    const res = await srv.post('/v1/tool-calls', {
      name: 'bash',
      arguments: { command: 'echo from-tool; cd /tmp' },
      sessionId: 'bb-tool',
    })
    expect(res.status).toBe(200)
    const answer = (await res.json()) as ToolCallAnswer
    expect(answer.result, answer.output).toMatchObject({ exitCode: 0, stdout: 'from-tool\n' })
  }, 120_000)

  test('a plain Debian rootfs without a user 1000 (no home): bash, coreutils and the persistent shell work', async () => {
    const r = await exec('plain-debian', {
      sessionId: 'deb',
      command:
        'cat /etc/debian_version >/dev/null && echo debian; id -u; touch /workspace/f && ls /workspace',
    })
    expect(r.state, JSON.stringify(r)).toBe('completed')
    expect(r.result).toMatchObject({ exitCode: 0, stdout: 'debian\n1000\nf\n' })
    await exec('plain-debian', { sessionId: 'deb', command: 'cd /tmp; X=kept', shell: 'persistent' })
    const kept = await exec('plain-debian', {
      sessionId: 'deb',
      command: 'echo "$PWD $X"',
      shell: 'persistent',
    })
    expect(kept.result?.stdout).toBe('/tmp kept\n')
  }, 120_000)

  test('an image the engine does not have: an error naming the engine and how to get the image', async () => {
    const r = await exec('missing', { command: 'true' })
    expect(r.error?.code, JSON.stringify(r)).toBe('SANDBOX_CREATE_FAILED')
    const message = r.error?.message ?? ''
    expect(message).toContain('image sandbox-router/not-built-here:1 is not on the Docker engine at ')
    expect(message).toContain('docker pull sandbox-router/not-built-here:1')
    expect(message).not.toMatch(/runc|OCI runtime|stat \//)
  }, 120_000)
})
