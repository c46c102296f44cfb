import { execFile } from 'node:child_process'
import { request } from 'node:http'
import { promisify } from 'node:util'
import { ALL_TRAFFIC, Sandbox, SandboxNotFoundError } from 'e2b'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { e2bServe } from '../support/e2b-serve.js'
import { scopeContainers, uniqueName } from '../support/sbx-cli.js'
import type { SbxServer } from '../support/sbx-cli.js'

const run = promisify(execFile)
const ACME = `acme_e2blife_${'a'.repeat(24)}`
const GLOBEX = `globex_e2blife_${'g'.repeat(24)}`

/** A GET to the server's port with `Host: host` (what a resolver for `*.localhost` would send). */
function getVia(port: number, host: string, path = '/') {
  return new Promise<{ status: number; body: string }>((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port, path, headers: { host } }, (res) => {
      let body = ''
      res.setEncoding('utf8')
      res.on('data', (d: string) => (body += d))
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }))
    })
    req.on('error', reject)
    req.end()
  })
}

/**
 * E2B's sandbox lifecycle and the control-plane calls around it against `node bin/sbx.js serve`,
 * through the real `e2b` SDK: `lifecycle.onTimeout: 'pause'` (the end of the lifetime pauses the
 * sandbox; connect resumes it), `autoResume` (traffic to its host name wakes it), filesystem-only
 * pauses (processes end, files stay), metrics from the engine, list filters and network updates.
 */
describe('E2B lifecycle, metrics, list filters and network updates through sbx serve (e2b SDK)', () => {
  const e2b = e2bServe('e2blife')
  const { scope } = e2b
  let srv: SbxServer
  let port: number
  const globex = () => ({ apiKey: GLOBEX })
  /** Resolves when the server logs that it paused `sandboxId`. */
  const pausedLogged = (sandboxId: string) =>
    srv.child.next((l) => l.text.includes('e2b sandbox paused') && l.text.includes(sandboxId), 60_000)

  beforeAll(async () => {
    srv = await e2b.start({
      config: {
        apiKeys: [
          { keyEnv: 'E2BLIFE_ACME_KEY', tenant: 'acme' },
          { keyEnv: 'E2BLIFE_GLOBEX_KEY', tenant: 'globex' },
        ],
        e2b: { templates: { base: 'e2b', net: 'e2b-net' } },
        // A template whose profile has a network (an egress allowlist).
        profiles: { 'e2b-net': { provider: 'docker', network: { allow: ['example.invalid'] } } },
        quotas: { requestsPerSecond: 1000 },
      },
      env: { SBX_API_KEY: ACME, E2BLIFE_ACME_KEY: ACME, E2BLIFE_GLOBEX_KEY: GLOBEX },
      key: ACME,
    })
    port = e2b.port
  }, 180_000)

  afterAll(() => e2b.stop(), 120_000)

  test("onTimeout 'pause': the end of the lifetime pauses the sandbox; connect resumes it with its files and processes", async () => {
    const sbx = await Sandbox.create('base', { timeoutMs: 4_000, lifecycle: { onTimeout: 'pause' } })
    try {
      expect((await sbx.getInfo()).lifecycle).toEqual({ onTimeout: 'pause', autoResume: false })
      await sbx.files.write('state.txt', 'kept')
      const ticker = await sbx.commands.run('while true; do date +%s%N > /tmp/tick; sleep 0.05; done', {
        background: true,
      })
      await pausedLogged(sbx.sandboxId)
      expect((await sbx.getInfo()).state).toBe('paused')
      expect(await sbx.isRunning()).toBe(false)
      // Frozen by the engine, not removed.
      const frozen = await run('docker', [
        'ps',
        '-q',
        '--filter',
        `label=sandbox-router.scope=${scope}`,
        '--filter',
        'status=paused',
      ])
      expect(frozen.stdout.trim().split('\n')).toHaveLength(1)
      // Without autoResume, traffic to its ports does not wake it.
      expect((await getVia(port, sbx.getHost(8000))).status).toBe(502)
      expect((await sbx.getInfo()).state).toBe('paused')

      const resumed = await sbx.connect({ timeoutMs: 60_000 })
      expect(await resumed.isRunning()).toBe(true)
      expect((await sbx.getInfo()).state).toBe('running')
      expect(await resumed.files.read('state.txt')).toBe('kept')
      expect((await resumed.commands.list()).map((p) => p.pid)).toContain(ticker.pid)
      const t1 = (await resumed.commands.run('cat /tmp/tick')).stdout
      await expect
        .poll(async () => (await resumed.commands.run('cat /tmp/tick')).stdout, { timeout: 10_000 })
        .not.toBe(t1)
    } finally {
      await sbx.kill()
    }
  }, 120_000)

  test('autoResume: a request to a port through its host name wakes the paused sandbox', async () => {
    const sbx = await Sandbox.create('base', {
      timeoutMs: 4_000,
      lifecycle: { onTimeout: 'pause', autoResume: true },
    })
    try {
      expect((await sbx.getInfo()).lifecycle).toEqual({ onTimeout: 'pause', autoResume: true })
      await sbx.files.write('site/index.html', 'awake\n')
      await sbx.commands.run('busybox httpd -f -p 8000 -h /home/user/site', { background: true })
      const host = sbx.getHost(8000)
      await expect
        .poll(async () => (await getVia(port, host, '/index.html')).status, { timeout: 20_000 })
        .toBe(200)
      await pausedLogged(sbx.sandboxId)
      expect((await Sandbox.getInfo(sbx.sandboxId)).state).toBe('paused')

      // The server in the sandbox answers as if it never stopped; the sandbox runs again.
      expect(await getVia(port, host, '/index.html')).toEqual({ status: 200, body: 'awake\n' })
      const info = await Sandbox.getInfo(sbx.sandboxId)
      expect(info.state).toBe('running')
      // It got its create-time lifetime again (it pauses again at its end).
      expect(info.endAt.getTime()).toBeGreaterThan(Date.now())
    } finally {
      await sbx.kill()
    }
  }, 120_000)

  test('a filesystem-only auto-pause ends the processes and keeps the files; connect resumes it', async () => {
    const sbx = await Sandbox.create('base', {
      timeoutMs: 4_000,
      lifecycle: { onTimeout: { action: 'pause', keepMemory: false } },
    })
    try {
      await sbx.files.write('/home/user/marker.txt', 'on disk')
      const sleeper = await sbx.commands.run('sleep 600', { background: true })
      expect((await sbx.commands.list()).map((p) => p.pid)).toContain(sleeper.pid)
      // How many `sleep` processes run in the sandbox (by process name).
      const sleepers = async (s: Sandbox) =>
        (await s.commands.run('grep -lx sleep /proc/[0-9]*/comm 2>/dev/null | wc -l')).stdout.trim()
      expect(await sleepers(sbx)).toBe('1')
      await pausedLogged(sbx.sandboxId)
      expect((await sbx.getInfo()).state).toBe('paused')

      const resumed = await sbx.connect()
      expect(await resumed.isRunning()).toBe(true)
      expect(await resumed.files.read('/home/user/marker.txt')).toBe('on disk')
      // As after a cold boot: nothing of before runs.
      expect(await resumed.commands.list()).toEqual([])
      expect(await sleepers(resumed)).toBe('0')
    } finally {
      await sbx.kill()
    }
  }, 120_000)

  test('metrics: CPU and memory from the engine, disk from the sandbox; a range before it is empty', async () => {
    const sbx = await Sandbox.create('base')
    try {
      const created = new Date()
      const [first] = await sbx.getMetrics()
      expect(first).toBeDefined()
      const [container] = await scopeContainers(scope)
      const inspected = await run('docker', ['inspect', '-f', '{{.HostConfig.Memory}}', container ?? ''])
      // The container's memory limit, as the engine has it.
      expect(first?.memTotal).toBe(Number(inspected.stdout.trim()))
      expect(first?.memUsed).toBeGreaterThan(0)
      expect(first?.memUsed).toBeLessThan(first?.memTotal ?? 0)
      expect(first?.cpuCount).toBeGreaterThanOrEqual(1)
      expect(first?.diskTotal).toBeGreaterThan(0)
      expect(first?.timestamp.getTime()).toBeGreaterThanOrEqual(created.getTime() - 1_000)

      // Real figures: a busy loop shows as CPU, a written file as disk.
      await sbx.commands.run('head -c 8388608 /dev/zero > /home/user/blob', { timeoutMs: 30_000 })
      await sbx.commands.run('while :; do :; done', { background: true })
      await expect
        .poll(
          async () => {
            const m = (await sbx.getMetrics()).at(-1)
            return (m?.cpuUsedPct ?? 0) > 20 && (m?.diskUsed ?? 0) >= (first?.diskUsed ?? 0) + 8_000_000
          },
          { timeout: 30_000, interval: 1_000 },
        )
        .toBe(true)
      const all = await sbx.getMetrics()
      expect(all.length).toBeGreaterThanOrEqual(2)
      expect(
        await sbx.getMetrics({
          start: new Date(Date.now() - 3_600_000),
          end: new Date(Date.now() - 1_800_000),
        }),
      ).toEqual([])
      // Another tenant's key: not found.
      await expect(Sandbox.getMetrics(sbx.sandboxId, globex())).rejects.toBeInstanceOf(SandboxNotFoundError)
    } finally {
      await sbx.kill()
    }
  }, 120_000)

  test('list: order by start time, started after, template', async () => {
    const tag = uniqueName('list')
    const older = await Sandbox.create('base', { metadata: { tag } })
    const newer = await Sandbox.create('net', { metadata: { tag } })
    try {
      const ids = async (opts: Parameters<typeof Sandbox.list>[0]) =>
        (await Sandbox.list(opts).nextItems()).map((s) => s.sandboxId)
      expect(await ids({ query: { metadata: { tag } } })).toEqual([newer.sandboxId, older.sandboxId])
      expect(await ids({ query: { metadata: { tag } }, order: 'asc' })).toEqual([
        older.sandboxId,
        newer.sandboxId,
      ])
      const startedAt = (await newer.getInfo()).startedAt
      expect(await ids({ query: { metadata: { tag }, startedAfter: startedAt } })).toEqual([newer.sandboxId])
      expect(await ids({ query: { metadata: { tag }, template: 'base' } })).toEqual([older.sandboxId])
      expect(await ids({ query: { metadata: { tag }, template: 'unknown' } })).toEqual([])
      // Another tenant sees none of them, whatever the filter.
      expect(await ids({ ...globex(), query: { metadata: { tag } }, order: 'asc' })).toEqual([])
    } finally {
      await Promise.all([older.kill(), newer.kill()])
    }
  }, 120_000)

  test("updateNetwork: checked as create's rules against the profile", async () => {
    const base = await Sandbox.create('base')
    const net = await Sandbox.create('net')
    try {
      // No network: every update is met by having none.
      await base.updateNetwork({})
      await base.updateNetwork({ allowOut: ['1.1.1.1'], denyOut: [ALL_TRAFFIC] })
      expect((await base.getInfo()).allowInternetAccess).toBe(false)
      // A profile with a network: per-sandbox lists are refused, and so is turning it off in place.
      await net.updateNetwork({})
      await expect(net.updateNetwork({ allowOut: ['example.com'] })).rejects.toThrow(
        /network.allowOut is not supported here/,
      )
      await expect(net.updateNetwork({ allowInternetAccess: false })).rejects.toThrow(
        /keeps the network it was created with here; create a new sandbox with allowInternetAccess: false/,
      )
      expect((await net.getInfo()).allowInternetAccess).toBe(true)
      await expect(Sandbox.updateNetwork(base.sandboxId, {}, globex())).rejects.toBeInstanceOf(
        SandboxNotFoundError,
      )
    } finally {
      await Promise.all([base.kill(), net.kill()])
    }
  }, 120_000)
})
