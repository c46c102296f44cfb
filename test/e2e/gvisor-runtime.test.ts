import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { configDir, removeScopeContainers, runSbx, startSbxServer, uniqueName } from '../support/sbx-cli.js'
import type { SbxServer } from '../support/sbx-cli.js'
import { startE2BEndpoint } from '../support/e2b-endpoint.js'

interface JobAnswer {
  state: string
  result?: { exitCode: number | null; stdout: string; stderr: string; timedOut: boolean }
  error?: { code: string; message: string }
}
interface ProvidersAnswer {
  providers: { id: string; runtimes?: string[]; profiles: { name: string; runtime: string }[] }[]
}

/**
 * A `runtime: runsc` profile through `node bin/sbx.js serve` on the real engine (gVisor registered
 * by scripts/setup-gvisor.sh): commands run under gVisor's kernel, files and timeouts work as under
 * runc, `/v1/providers` lists the engine's runtimes, and a profile gVisor cannot take is refused.
 */
describe('gVisor (runsc) profiles through sbx serve', () => {
  const scope = uniqueName('gvisor')
  let srv: SbxServer

  beforeAll(async () => {
    srv = await startSbxServer('serve', {
      config: {
        queue: { prefix: scope },
        profiles: { gvisor: { provider: 'docker', runtime: 'runsc' } },
      },
    })
  }, 180_000)

  afterAll(async () => {
    await srv?.stop()
    await removeScopeContainers(scope)
  }, 60_000)

  const exec = async (profile: string, body: Record<string, unknown>): Promise<JobAnswer> => {
    const res = await srv.post('/v1/exec', { provider: 'docker', profile, ...body })
    const answer = (await res.json()) as JobAnswer
    expect(res.status, JSON.stringify(answer)).toBe(200)
    return answer
  }

  test('/v1/providers lists the engine runtimes and each profile runtime', async () => {
    const res = await srv.fetch('/v1/providers')
    expect(res.status).toBe(200)
    const docker = ((await res.json()) as ProvidersAnswer).providers.find((p) => p.id === 'docker')
    expect(docker?.runtimes).toEqual(expect.arrayContaining(['runc', 'runsc']))
    const runtimes = Object.fromEntries(docker?.profiles.map((p) => [p.name, p.runtime]) ?? [])
    expect(runtimes).toMatchObject({ default: 'runc', gvisor: 'runsc' })
  })

  test("uname -a shows gVisor's kernel under runsc, the host's under runc", async () => {
    const probe = 'uname -a; dmesg 2>/dev/null | head -n 1'
    const gv = await exec('gvisor', { sessionId: 'gv-uname', command: probe })
    expect(gv.result?.exitCode).toBe(0)
    // gVisor reports a fixed Linux 4.4.0 and greets in its own kernel log.
    expect(gv.result?.stdout).toMatch(/^Linux sandbox 4\.4\.0 #1 SMP Sun Jan 10 15:06:54 PST 2016/)
    expect(gv.result?.stdout).toContain('Starting gVisor')
    const rc = await exec('default', { sessionId: 'rc-uname', command: probe })
    expect(rc.result?.stdout).not.toContain('gVisor')
    expect(rc.result?.stdout).not.toMatch(/ 4\.4\.0 #1 SMP Sun Jan 10 15:06:54 PST 2016/)
  }, 120_000)

  test('a command: stdout, stderr, exit code, as the sandbox user', async () => {
    const j = await exec('gvisor', { sessionId: 'gv-cmd', command: 'echo out; echo err >&2; id -u; exit 3' })
    expect(j.result).toMatchObject({ exitCode: 3, stdout: 'out\n1000\n', stderr: 'err\n', timedOut: false })
  }, 120_000)

  test('a file round trip: upload, use in a command, download', async () => {
    await exec('gvisor', { sessionId: 'gv-files', command: 'true' })
    const put = await srv.fetch('/v1/sessions/gv-files/files?path=in/a.txt', {
      method: 'PUT',
      body: 'from the API\n',
      headers: { 'content-type': 'application/octet-stream' },
    })
    expect(put.status).toBe(200)
    const j = await exec('gvisor', { sessionId: 'gv-files', command: 'tr a-z A-Z < in/a.txt > out.txt' })
    expect(j.result?.exitCode).toBe(0)
    const got = await srv.fetch('/v1/sessions/gv-files/files?path=out.txt')
    expect(got.status).toBe(200)
    expect(await got.text()).toBe('FROM THE API\n')
  }, 120_000)

  test('a timeout kills the command, keeps its partial output, and the session goes on', async () => {
    const started = Date.now()
    const j = await exec('gvisor', {
      sessionId: 'gv-timeout',
      command: 'echo before; sleep 30; echo after',
      timeoutMs: 1000,
    })
    expect(j.result).toMatchObject({ timedOut: true, stdout: 'before\n' })
    expect(Date.now() - started).toBeLessThan(10_000)
    const next = await exec('gvisor', { sessionId: 'gv-timeout', command: 'pgrep sleep || echo none' })
    expect(next.result?.stdout).toBe('none\n')
  }, 120_000)
})

describe('profiles gVisor cannot take are refused with the reason', () => {
  test('runtime runsc with network bridge: config check fails naming both', async () => {
    const dir = configDir({
      profiles: { open: { provider: 'docker', runtime: 'runsc', network: 'bridge' } },
    })
    const r = await runSbx(['config', 'check', '--config', join(dir, 'sandbox-router.config.json')])
    expect(r.code).not.toBe(0)
    expect(r.stderr).toMatch(/runtime 'runsc' takes network 'none' or an egress allowlist only/)
  })

  test('an unknown runtime: config check lists the ones there are', async () => {
    const dir = configDir({ profiles: { odd: { provider: 'docker', runtime: 'kata' as 'runc' } } })
    const r = await runSbx(['config', 'check', '--config', join(dir, 'sandbox-router.config.json')])
    expect(r.code).not.toBe(0)
    expect(r.stderr).toMatch(/runtime/)
    expect(r.stderr).toMatch(/runc/)
    expect(r.stderr).toMatch(/runsc/)
  })

  test('sbx serve refuses to start with a runsc profile on a provider that runs its own isolation', async () => {
    const e2b = await startE2BEndpoint()
    try {
      const cwd = configDir({
        queue: { prefix: uniqueName('gvisor-e2b') },
        profiles: { remote: { provider: 'e2b', runtime: 'runsc' } },
      })
      const r = await runSbx(['serve', '--host', '127.0.0.1', '--port', '0'], {
        cwd,
        env: { E2B_API_KEY: e2b.apiKey, E2B_API_URL: e2b.apiUrl, E2B_SANDBOX_URL: e2b.sandboxUrl },
        timeoutMs: 60_000,
      })
      expect(r.code).not.toBe(0)
      expect(r.stderr).toMatch(
        /profile 'remote' asks for runtime 'runsc'.*provider 'e2b'.*runtime 'runc' only/,
      )
    } finally {
      await e2b.close()
    }
  }, 90_000)
})
