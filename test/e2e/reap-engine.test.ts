import { execFile, spawn } from 'node:child_process'
import { once } from 'node:events'
import { createInterface } from 'node:readline'
import { promisify } from 'node:util'
import { afterAll, describe, expect, test } from 'vitest'
import type { ConfigInput } from '../../src/config/schema.js'
import { freePort } from '../support/redis-server.js'
import {
  configDir,
  removeScopeContainers,
  runSbx,
  scopeContainers,
  startSbxServer,
  uniqueName,
} from '../support/sbx-cli.js'

const run = promisify(execFile)

async function state(id: string): Promise<string> {
  const { stdout } = await run('docker', ['inspect', '-f', '{{.State.Status}} {{.State.ExitCode}}', id])
  return stdout.trim()
}

/** Bounded poll until the container is no longer running. */
async function untilStopped(id: string, boundMs: number): Promise<void> {
  const started = performance.now()
  while ((await state(id)).startsWith('running')) {
    if (performance.now() - started > boundMs) throw new Error(`${id} still running after ${boundMs} ms`)
    await new Promise((r) => setTimeout(r, 200))
  }
}

interface ReapJson {
  scope: string | null
  dryRun: boolean
  leftovers: { id: string; state: string; reason: string; scope: string }[]
  removed: string[]
}

/**
 * `sbx reap --engine`: with no Redis at all (the config names one that is not there), this project's
 * stopped containers are listed, removed only with --yes; running ones only with --running and
 * only while nothing is attached; containers without the owner label are never touched.
 */
describe('sbx reap --engine', () => {
  const scope = uniqueName('reapeng')
  afterAll(async () => {
    await removeScopeContainers(scope)
  })

  test('lists, then removes, leftovers by label without Redis', { timeout: 180_000 }, async () => {
    const config = {
      queue: { prefix: scope },
      providers: { docker: { enabled: true, idleExitSlackMs: 1_000 } },
      profiles: {
        brief: { provider: 'docker', idleTtlMs: 2_000 },
        long: { provider: 'docker', idleTtlMs: 600_000 },
      },
    } as ConfigInput
    const srv = await startSbxServer('serve', { config })
    const exec = async (sessionId: string, profile: string) => {
      const res = await srv.post('/v1/exec', { provider: 'docker', profile, sessionId, command: 'echo hi' })
      expect(((await res.json()) as { state: string }).state).toBe('completed')
    }
    await exec('ends', 'brief')
    await exec('stays', 'long')
    const idOf = async (profile: string) => {
      const { stdout } = await run('docker', [
        'ps',
        '-q',
        '--no-trunc',
        '--filter',
        `label=sandbox-router.scope=${scope}`,
        '--filter',
        `label=sandbox-router.profile=${profile}`,
      ])
      const [id] = stdout.split('\n').filter(Boolean)
      if (!id) throw new Error(`no running container of profile ${profile}`)
      return id
    }
    const ends = await idOf('brief')
    const stays = await idOf('long')
    // A container of the same scope without the owner label: not this project's, never touched.
    const { stdout: foreignOut } = await run('docker', [
      'create',
      '--label',
      `sandbox-router.scope=${scope}`,
      'sandbox-router/base:latest',
    ])
    const foreign = foreignOut.trim()
    await srv.kill() // SIGKILL: no shutdown, so nothing destroys its sandboxes
    await untilStopped(ends, 2_000 + 1_000 + 20_000)
    expect(await state(ends)).toBe('exited 75')

    // The reap runs where the config names a Redis that is not there.
    const cwd = configDir({
      queue: { driver: 'bullmq', redisUrl: `redis://127.0.0.1:${await freePort()}`, prefix: scope },
    } as ConfigInput)
    const reap = async (...args: string[]) => {
      const r = await runSbx(['reap', '--engine', ...args], { cwd, timeoutMs: 60_000 })
      expect(r.code, r.stderr).toBe(0)
      return r.stdout
    }

    const dry = await reap()
    expect(dry).toContain(`1 stopped sandbox container in scope ${scope}:`)
    expect(dry).toContain(`${ends.slice(0, 12)}  ended itself after idling`)
    expect(dry).not.toContain(stays.slice(0, 12))
    expect(dry).not.toContain(foreign.slice(0, 12))
    expect(dry).toContain('dry run: nothing removed; run again with --yes to remove them')
    expect((await scopeContainers(scope, true)).length).toBe(3)

    const withRunning = JSON.parse(await reap('--running', '--json')) as ReapJson
    expect(withRunning).toMatchObject({ scope, dryRun: true, removed: [] })
    expect(withRunning.leftovers.map((l) => [l.id, l.reason]).sort()).toEqual(
      [
        [ends, 'ended itself after idling'],
        [stays, 'running with nothing attached'],
      ].sort(),
    )

    const removed = await reap('--yes')
    expect(removed).toContain('removed 1')
    await expect(state(ends)).rejects.toThrow(/No such object|No such container/)
    expect(await state(stays)).toBe('running 0')

    // Something attached (a `docker exec`, as a worker's channel is): never listed, never removed.
    const attached = spawn('docker', ['exec', '-i', stays, 'sh', '-c', 'echo attached; read line'])
    const lines = createInterface({ input: attached.stdout })
    const [first] = (await once(lines, 'line')) as [string]
    expect(first).toBe('attached')
    try {
      const kept = JSON.parse(await reap('--running', '--yes', '--json')) as ReapJson
      expect(kept).toMatchObject({ leftovers: [], removed: [] })
      expect(await state(stays)).toBe('running 0')
    } finally {
      attached.kill('SIGKILL')
      await once(attached, 'exit')
    }

    // Detached again: with --running it goes (the exec's end may take the engine a moment to see).
    const deadline = performance.now() + 20_000
    let last: ReapJson | undefined
    while (performance.now() < deadline) {
      last = JSON.parse(await reap('--running', '--yes', '--json')) as ReapJson
      if (last.removed.length) break
      await new Promise((r) => setTimeout(r, 200))
    }
    expect(last?.removed).toEqual([stays])
    expect(await scopeContainers(scope, true)).toEqual([foreign.slice(0, 12)])
    expect(await reap()).toContain(`no stopped sandbox containers in scope ${scope}`)
  })

  test('bad flags are a usage error naming the problem', async () => {
    const r = await runSbx(['reap', '--engine', '--yes', '--dry-run'])
    expect(r.code).toBe(2)
    expect(r.stderr).toContain('--yes and --dry-run contradict each other')
    const unknown = await runSbx(['reap', '--engine', '--everything'])
    expect(unknown.code).toBe(2)
    expect(unknown.stderr).toMatch(/Unknown option '--everything'/)
  })
})
