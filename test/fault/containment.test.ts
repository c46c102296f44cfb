import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { startLiveService } from '../support/live-service.js'
import type { LiveService } from '../support/live-service.js'
import type { LiveServer } from '../support/live-service.js'

// Attacks a model-written command might make, run through the whole service (HTTP → queue → worker →
// pooled sandbox) on the default profile (runc) and on the same profile under gVisor (runsc).
// After each, the same session must still answer.
const KEY = 'contain-key-0123456789abcdef'
let server: LiveServer

let live: LiveService

beforeAll(async () => {
  live = await startLiveService({
    prefix: `contain${process.pid}`,
    keys: [{ key: KEY, tenant: 'attacker' }],
    config: { profiles: { gvisor: { provider: 'docker', runtime: 'runsc' } } },
  })
  server = live.server
}, 120_000)

afterAll(() => live?.close(), 60_000)

interface Job {
  state: string
  result?: {
    exitCode: number | null
    stdout: string
    stderr: string
    timedOut: boolean
    truncated: boolean
    durationMs: number
    sandboxReplaced?: unknown
  }
  error?: { code: string }
}

for (const profile of ['default', 'gvisor'] as const) {
  const runtime = profile === 'default' ? 'runc' : 'runsc'

  async function run(command: string, timeoutMs = 20_000, sessionId = `contain-${profile}`): Promise<Job> {
    const r = await fetch(`${server.url}/v1/exec`, {
      method: 'POST',
      headers: { authorization: `Bearer ${KEY}`, 'content-type': 'application/json' },
      body: JSON.stringify({
        provider: 'docker',
        profile,
        sessionId,
        command,
        timeoutMs,
      }),
    })
    return (await r.json()) as Job
  }

  async function stillHealthy(): Promise<void> {
    const j = await run('echo alive')
    expect(j.result?.stdout, JSON.stringify(j)).toBe('alive\n')
  }

  describe(`sandbox containment under ${runtime} (profile ${profile}), through the service`, () => {
    test('no network: only loopback, no route, DNS and TCP fail', async () => {
      // No address outside the sandbox is named: with no interface but lo and no route, nothing can leave.
      const j = await run(
        'cut -d: -f1 /proc/net/dev | tail -n +3 | tr -d " "; echo "routes=$(tail -n +2 /proc/net/route | wc -l)"; ' +
          'nslookup example.com >/dev/null 2>&1; echo "dns=$?"; (exec 3<>/dev/tcp/example.com/80) 2>/dev/null; echo "tcp=$?"',
      )
      const out = `${j.result?.stdout}${j.result?.stderr}`
      expect(j.result?.stdout.split('\n')[0]).toBe('lo')
      expect(out).not.toMatch(/^eth/m)
      expect(out).toContain('routes=0')
      expect(out).toMatch(/dns=[1-9]/)
      expect(out).toMatch(/tcp=[1-9]/)
      await stillHealthy()
    })

    test('host processes and the engine socket are invisible; root filesystem is read-only; not root', async () => {
      const j = await run(
        'ps | wc -l; ls /var/run/docker.sock 2>&1; touch /etc/x 2>&1; touch /usr/bin/x 2>&1; id -u; touch /workspace/ok && echo writable; ' +
          `echo "root=$(awk '$2 == "/" { split($4, o, ","); print o[1] }' /proc/mounts)"`,
      )
      const lines = (j.result?.stdout ?? '').split('\n')
      expect(Number(lines[0])).toBeLessThan(15) // only the sandbox's own processes
      const out = `${j.result?.stdout}${j.result?.stderr}`
      expect(out).toMatch(/docker\.sock: No such file/)
      // runc says EROFS; gVisor checks permissions first (EACCES); its root is mounted ro all the same.
      expect(out).toMatch(/Read-only file system|Permission denied/)
      expect(out).toContain('root=ro')
      expect(out).toContain('1000')
      expect(out).toContain('writable')
      await stillHealthy()
    })

    test('a fork bomb is stopped by the pids limit', async () => {
      // A session of its own: under gVisor the bomb's last processes can go on holding the sandbox's
      // pids for a while, and the cases after this one must not inherit them.
      const bombSession = `contain-${profile}-bomb`
      const j = await run('bomb() { bomb | bomb & }; bomb; sleep 2; echo survived', 15_000, bombSession)
      expect(j.state, JSON.stringify(j)).toBe('completed')
      // The bomb's last processes may hold every pid of the sandbox a little longer (on a loaded
      // machine, under gVisor, a call then fails to fork): the sandbox lives through it, and the
      // same sandbox answers once they are gone.
      const deadline = Date.now() + 30_000
      let after = await run('echo alive', 20_000, bombSession)
      while (after.result?.stdout !== 'alive\n' && Date.now() < deadline) {
        await new Promise((r) => setTimeout(r, 250))
        after = await run('echo alive', 20_000, bombSession)
      }
      expect(after.result?.stdout, JSON.stringify(after)).toBe('alive\n')
      expect(after.result?.sandboxReplaced, JSON.stringify(after)).toBeUndefined()
      const deleted = await fetch(`${server.url}/v1/sessions/${bombSession}`, {
        method: 'DELETE',
        headers: { authorization: `Bearer ${KEY}` },
      })
      expect(deleted.status).toBeLessThan(300)
      // The service's own session still answers.
      await stillHealthy()
    }, 90_000)

    test('a memory bomb is stopped by the memory limit', async () => {
      // A string doubling to gigabytes: few system calls, so gVisor's slow ones do not hide the limit.
      const j = await run(`bash -c 'x=1; while :; do x=$x$x; done'; echo "exit=$?"`, 60_000)
      if (runtime === 'runc') {
        expect(j.state).toBe('completed')
        expect(j.result?.stdout).toMatch(/exit=(137|1)/)
      } else {
        // gVisor's memory is one host cgroup: the engine's OOM kill ends the whole sandbox (never
        // the host); the call fails and the session's next call gets a new sandbox.
        expect(j.state).toBe('failed')
      }
      await stillHealthy()
    }, 120_000)

    test('an output flood is capped and the command is not blocked', async () => {
      const j = await run('yes flood | head -c 50000000; echo done >&2', 20_000)
      expect(j.state, JSON.stringify({ ...j, result: { ...j.result, stdout: undefined } })).toBe('completed')
      expect(j.result?.truncated).toBe(true)
      // The head and the tail of the cap, with the marker between them (docs/providers.md "Output past the cap").
      const out = j.result?.stdout ?? ''
      const marker = /\n\[\.\.\. (\d+) bytes dropped \.\.\.\]\n/.exec(out)
      expect(marker).not.toBeNull()
      expect(out.length - (marker?.[0].length ?? 0)).toBe(1_048_576)
      expect(Number(marker?.[1])).toBe(50_000_000 - 1_048_576)
      expect(j.result?.stderr).toBe('done\n')
      await stillHealthy()
    })

    test('a sleep past the timeout is killed with its partial output kept', async () => {
      const j = await run('echo before; sleep 30; echo after', 1_000)
      expect(j.result).toMatchObject({ timedOut: true, stdout: 'before\n' })
      expect(j.result?.durationMs).toBeLessThan(5_000)
      await stillHealthy()
    })
  })
}
