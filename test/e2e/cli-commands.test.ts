import { execFile, spawn } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import {
  configDir,
  fleetConfig,
  removeScopeContainers,
  runSbx,
  scopeContainers,
  startSbxServer,
  startSbxWorker,
  uniqueName,
} from '../support/sbx-cli.js'
import type { SbxServer } from '../support/sbx-cli.js'

/*
 * The one-shot commands of the CLI table in docs/cli.md, run as a user runs them (`node bin/sbx.js …`),
 * judged by their output and exit codes only.
 */
const SBX_BIN = fileURLToPath(new URL('../../bin/sbx.js', import.meta.url))
const docker = (...args: string[]) => promisify(execFile)('docker', args)
const scopes: string[] = []
const servers: SbxServer[] = []
afterAll(async () => {
  for (const s of servers) await s.stop()
  for (const scope of scopes) await removeScopeContainers(scope)
}, 60_000)

/** A directory whose config file gives the process a scope of its own. */
function embedded(tag: string): { cwd: string; scope: string } {
  const scope = uniqueName(tag)
  scopes.push(scope)
  return { cwd: configDir({ queue: { prefix: scope } }), scope }
}

describe('sbx exec (embedded: runs one command and exits with its code)', () => {
  test('prints the output live and exits 0; leaves no sandbox behind', async () => {
    const { cwd, scope } = embedded('cliexec')
    const r = await runSbx(['exec', '--', 'echo hi; echo err >&2'], { cwd })
    expect(r).toMatchObject({ code: 0, stdout: 'hi\n' })
    expect(r.stderr).toContain('err\n')
    expect(await scopeContainers(scope, true)).toEqual([])
  })

  test("exits with the command's exit code; --json prints the result", async () => {
    const { cwd } = embedded('cliexec')
    expect((await runSbx(['exec', '--', 'exit 3'], { cwd })).code).toBe(3)
    const r = await runSbx(['exec', '--json', '--', 'printf x; exit 4'], { cwd })
    expect(r.code).toBe(4)
    expect(JSON.parse(r.stdout)).toMatchObject({ exitCode: 4, stdout: 'x', timedOut: false })
  })

  test('a timeout says so on stderr and exits 137', async () => {
    const { cwd } = embedded('cliexec')
    const r = await runSbx(['exec', '--timeout', '500', '--', 'echo before; sleep 30'], { cwd })
    expect(r.code).toBe(137)
    expect(r.stdout).toBe('before\n')
    expect(r.stderr).toMatch(/timed out after \d+ ms; the process group was killed/)
  })

  test('usage errors exit 2 and say what is wrong', async () => {
    const { cwd } = embedded('cliexec')
    const r = await runSbx(['exec'], { cwd })
    expect(r.code).toBe(2)
    expect(r.stderr).toContain('no command given')
  })
})

describe('sbx exec --url (runs on a running server, in its sessions)', () => {
  let server: SbxServer
  const remote = (args: string[]): Promise<{ code: number; stdout: string; stderr: string }> =>
    runSbx(['exec', '--url', server.url, '--key', server.key, ...args], { cwd: configDir({}) })

  beforeAll(async () => {
    const scope = uniqueName('cliurl')
    scopes.push(scope)
    server = await startSbxServer('serve', { config: { queue: { prefix: scope } } })
    servers.push(server)
  }, 120_000)

  test("live output, exit codes, --json, and the session is the server's", async () => {
    const first = await remote([
      '--session',
      'cli-url',
      '--',
      'echo kept > /workspace/f; echo hi; echo err >&2',
    ])
    expect(first).toMatchObject({ code: 0, stdout: 'hi\n' })
    expect(first.stderr).toContain('err\n')
    expect(await remote(['--session', 'cli-url', '--', 'cat /workspace/f; exit 3'])).toMatchObject({
      code: 3,
      stdout: 'kept\n',
    })
    const sessions = (await (await server.fetch('/v1/sessions')).json()) as { sessions: { id: string }[] }
    expect(sessions.sessions.map((x) => x.id)).toContain('cli-url')
    const json = await remote(['--json', '--', 'printf x; exit 4'])
    expect(json.code).toBe(4)
    expect(JSON.parse(json.stdout)).toMatchObject({ exitCode: 4, stdout: 'x', timedOut: false })
    const timedOut = await remote(['--timeout', '500', '--', 'echo before; sleep 30'])
    expect(timedOut).toMatchObject({ code: 137, stdout: 'before\n' })
    expect(timedOut.stderr).toMatch(/timed out after \d+ ms/)
  })

  test('Ctrl-C cancels the job on the server', async () => {
    const child = spawn(
      process.execPath,
      [
        SBX_BIN,
        'exec',
        '--url',
        server.url,
        '--key',
        server.key,
        '--session',
        'cli-url-int',
        '--',
        'echo started; sleep 30',
      ],
      { cwd: configDir({}), env: { ...process.env, NO_COLOR: '1' } },
    )
    let stderr = ''
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()))
    await new Promise<void>((resolve, reject) => {
      child.stdout.on('data', (d: Buffer) => d.toString().includes('started') && resolve())
      child.once('exit', () => reject(new Error(`exited before its output: ${stderr}`)))
    })
    child.kill('SIGINT')
    const code = await new Promise<number | null>((resolve) => child.once('exit', resolve))
    expect(code, stderr).toBe(1)
    expect(stderr).toMatch(/error: JOB_CANCELLED/)
    const jobs = (await (await server.fetch('/v1/jobs?sessionId=cli-url-int')).json()) as {
      jobs: { state: string }[]
    }
    expect(jobs.jobs[0]?.state).toBe('cancelled')
  })

  test('an unreachable server and --url with --redis are clear errors', async () => {
    const down = await runSbx(['exec', '--url', 'http://127.0.0.1:9', '--key', 'k'.repeat(20), '--', 'true'])
    expect(down.code).toBe(1)
    expect(down.stderr).toMatch(/cannot reach http:\/\/127\.0\.0\.1:9/)
    const both = await runSbx(['exec', '--url', 'http://127.0.0.1:9', '--redis', 'redis://x', '--', 'true'])
    expect(both.code).toBe(2)
    expect(both.stderr).toContain('--url runs the command on a server')
  })
})

describe('sbx config check / providers', () => {
  test('config check prints what the config resolves to; a bad file exits non-zero naming the field', async () => {
    const { cwd } = embedded('clicfg')
    const ok = await runSbx(['config', 'check', '--json'], { cwd })
    expect(ok.code).toBe(0)
    expect(JSON.parse(ok.stdout)).toMatchObject({ queue: 'memory', providers: ['docker'] })
    const bad = configDir({ quotas: { maxSandboxes: -1 } } as never)
    const r = await runSbx(['config', 'check'], { cwd: bad })
    expect(r.code).not.toBe(0)
    expect(r.stderr).toContain('maxSandboxes')
  })

  test('providers lists docker as healthy with its default profile', async () => {
    const { cwd } = embedded('cliprov')
    const r = await runSbx(['providers', '--json'], { cwd })
    expect(r.code).toBe(0)
    expect(JSON.parse(r.stdout)).toContainEqual(
      expect.objectContaining({
        id: 'docker',
        health: { ok: true },
        profiles: expect.arrayContaining(['default']),
      }),
    )
  })
})

describe('a fleet API process: the dashboard and sbx reap', () => {
  test('/admin/queues opens for the admin key only', async () => {
    const scope = uniqueName('cliadm')
    scopes.push(scope)
    // The dashboard shows BullMQ queues: a fleet on the bullmq driver has it (test/e2e/dashboard-absent.test.ts: the others).
    const api = await startSbxServer('api', { config: fleetConfig(scope, { queue: { driver: 'bullmq' } }) })
    servers.push(api)
    const page = await api.fetch('/admin/queues')
    expect(page.status).toBe(200)
    expect(page.headers.get('content-type')).toContain('text/html')
    expect(
      await api.fetch('/admin/queues', { key: 'not-a-key-0123456789abcdef' }).then((r) => r.status),
    ).toBe(401)
  })

  test('sbx reap destroys a sandbox of its scope that no session holds, and keeps a bound one', async () => {
    const scope = uniqueName('clireap')
    scopes.push(scope)
    const config = fleetConfig(scope)
    const api = await startSbxServer('api', { config })
    servers.push(api)
    const worker = await startSbxWorker({ config })
    try {
      const bound = await api.post('/v1/exec', {
        provider: 'docker',
        profile: 'default',
        sessionId: 'kept',
        command: 'echo 1 > f',
      })
      expect(((await bound.json()) as { state: string }).state).toBe('completed')
    } finally {
      await worker.stop()
    }
    const [kept] = await scopeContainers(scope)
    expect(kept).toBeDefined()
    // A container of this scope that no session binds and no lease holds, created an hour ago.
    const { stdout } = await docker(
      'run',
      '-d',
      '--network',
      'none',
      '--label',
      'sandbox-router.owner=sandbox-router',
      '--label',
      `sandbox-router.scope=${scope}`,
      '--label',
      `sandbox-router.created-at=${Date.now() - 3_600_000}`,
      'sandbox-router/base:latest',
      'sleep',
      '600',
    )
    const orphan = stdout.trim().slice(0, 12)
    const r = await runSbx(['reap', '--json'], { cwd: configDir(config) })
    expect(r.code).toBe(0)
    expect(JSON.parse(r.stdout)).toEqual({ reaped: 1, failedSnapshots: 0, deletedSnapshotData: 0 })
    const left = await scopeContainers(scope)
    expect(left).toEqual([kept])
    expect(left).not.toContain(orphan)
  }, 90_000) // three CLI processes start one after another (api, worker, reap)
})
