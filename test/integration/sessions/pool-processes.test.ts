import { spawn } from 'node:child_process'
import type { ChildProcessWithoutNullStreams } from 'node:child_process'
import { once } from 'node:events'
import { fileURLToPath } from 'node:url'
import { createInterface } from 'node:readline'
import { describe, expect, onTestFinished } from 'vitest'
import type { PoolEnv } from '../../support/pool-env.js'
import { key, poolTest as test, waitFor } from '../../support/pool-env.js'

const WORKER = fileURLToPath(new URL('../../support/pool-worker.ts', import.meta.url))

/** A worker process on the test's Redis prefix and scope; resolves once it is ready. */
// A child process under tsx can take tens of seconds to start on a loaded 2-core CI machine: the
// tests allow for it (what they check is the sharing, not the start-up time).
async function worker(env: PoolEnv, extra: Record<string, string>) {
  const child: ChildProcessWithoutNullStreams = spawn(process.execPath, ['--import', 'tsx', WORKER], {
    env: {
      ...process.env,
      REDIS_URL: process.env.REDIS_URL ?? 'redis://127.0.0.1:6379',
      POOL_PREFIX: env.prefix,
      POOL_SCOPE: env.scope,
      ...extra,
    },
  })
  // A failed test leaves no worker process behind.
  onTestFinished(() => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL')
  })
  let stderr = ''
  child.stderr.on('data', (d: Buffer) => (stderr += d.toString()))
  const lines = createInterface({ input: child.stdout })
  const next = async (): Promise<string> => {
    const [line] = (await Promise.race([
      once(lines, 'line'),
      once(child, 'exit').then(() => {
        throw new Error(`worker exited: ${stderr}`)
      }),
    ])) as [string]
    return line
  }
  expect(await next()).toBe('ready')
  return {
    child,
    /** Acquires in the worker; resolves with the sandbox id and whether it was a hit. */
    async acquire(): Promise<{ id: string; hit: boolean }> {
      child.stdin.write('go\n')
      const [word, id, hit] = (await next()).split(' ')
      expect(word).toBe('lease')
      return { id: id ?? '', hit: hit === 'true' }
    },
    async release(): Promise<void> {
      child.stdin.write('release\n')
      const [code] = (await once(child, 'exit')) as [number | null]
      expect(code, stderr).toBe(0)
    },
  }
}

describe('session pool across processes (real Docker, real Redis)', () => {
  test('a worker process and this one acquire the same new session at once: one sandbox, shared', async ({
    env,
  }) => {
    const other = await worker(env, { SESSION_ID: 'cross' })
    const pool = env.pool()
    const [theirs, ...ours] = await Promise.all([
      other.acquire(),
      ...Array.from({ length: 3 }, () => pool.acquire(key('plain', 'cross'))),
    ])
    expect(new Set([theirs.id, ...ours.map((l) => l.ref.id)]).size).toBe(1)
    expect(await env.containers()).toHaveLength(1)
    await Promise.all(ours.map((l) => l.release()))
    await other.release()
  }, 120_000)

  test('a worker process killed with SIGKILL mid-lease: its ephemeral sandbox is reaped after the lease lapses', async ({
    env,
  }) => {
    const doomed = await worker(env, { LEASE_TTL_MS: '2000' })
    const { id } = await doomed.acquire()
    doomed.child.kill('SIGKILL')
    await once(doomed.child, 'exit')
    const survivor = env.pool({ reapGraceMs: 0 })
    expect(await survivor.reap()).toBe(0) // the lease is still live
    await waitFor(async () => (await survivor.reap()) === 1, 10_000, 'the dead worker’s lease to lapse')
    expect(await env.exists(id)).toBe(false)
  }, 120_000)
})
