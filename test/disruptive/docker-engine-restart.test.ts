/*
 * The Docker engine restarted under a live session (issue 7). This file stops and restarts the
 * machine's dockerd, so it runs in its own vitest pass after every other suite
 * (`vitest.disruptive.config.ts`, part of `npm test`), never beside tests that use the engine.
 */
import { execFile } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { performance } from 'node:perf_hooks'
import { promisify } from 'node:util'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { AppError } from '../../src/errors.js'
import { createWorld } from '../support/queue-world.js'
import type { World } from '../support/queue-world.js'
import { SECOND_ENGINE } from '../support/second-engine.js'

const run = promisify(execFile)
const SETUP = new URL('../../scripts/setup.sh', import.meta.url).pathname

const pidIn = (file: string): number | undefined => {
  try {
    const pid = Number(readFileSync(file, 'utf8').trim())
    return Number.isInteger(pid) && pid > 0 ? pid : undefined
  } catch {
    return undefined
  }
}

/**
 * The pid of the machine's own running dockerd (the one at /var/run/docker.sock), or undefined. Never
 * the second test engine's (test/support/second-engine.ts), which may run beside it: `pidof dockerd`
 * lists both, newest first.
 */
async function dockerdPid(): Promise<number | undefined> {
  const second = pidIn(SECOND_ENGINE.pidFile)
  try {
    const { stdout } = await run('pidof', ['dockerd'])
    const pids = stdout.trim().split(/\s+/).map(Number)
    const own = pidIn('/var/run/docker.pid')
    if (own !== undefined && pids.includes(own)) return own
    return pids.find((p) => Number.isInteger(p) && p > 0 && p !== second)
  } catch {
    return undefined
  }
}

const alive = (pid: number): boolean => {
  try {
    process.kill(pid, 0)
    // A zombie (exited, not yet reaped by its parent) counts as gone.
    return !readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]?.startsWith('Z')
  } catch {
    return false
  }
}

/** Stops dockerd (SIGTERM: it stops its containers first) and resolves once the process is gone. */
async function stopEngine(): Promise<void> {
  const pid = await dockerdPid()
  if (pid === undefined) throw new Error('dockerd is not running; run scripts/setup.sh first')
  process.kill(pid, 'SIGTERM')
  const deadline = performance.now() + 60_000
  while (alive(pid)) {
    if (performance.now() > deadline) throw new Error(`dockerd ${pid} did not exit within 60 s`)
    await new Promise((r) => setTimeout(r, 50))
  }
}

/** Starts the engine the way the project does (scripts/setup.sh waits until it answers). */
async function startEngine(): Promise<void> {
  await run('bash', [SETUP], { timeout: 120_000 })
}

const codeOf = (err: unknown): string | undefined => (err instanceof AppError ? err.code : undefined)

describe('Docker engine restarted under a live session', () => {
  let world: World
  beforeAll(async () => {
    await startEngine()
    world = await createWorld({ driver: 'in-process' })
  }, 180_000)
  afterAll(async () => {
    // Whatever happened, leave the machine with a running engine and none of this test's containers.
    if ((await dockerdPid()) === undefined) await startEngine()
    await world.close()
    expect(await world.containers()).toEqual([])
  }, 180_000)

  test('the running command ends with a clear error, calls during the outage fail fast, the session rebinds', async () => {
    const sessionId = 'engine-restart'
    const first = await world.executor.execute(world.route('echo kept > marker && cat marker', { sessionId }))
    expect(first.stdout).toBe('kept\n')

    // A long command, stopped under it.
    let stopping: Promise<void> | undefined
    let stoppedAt = 0
    const inflight = world.executor
      .execute(world.route('echo started; sleep 120', { sessionId, timeoutMs: 60_000 }), {
        onStdout: (c) => {
          if (c.includes('started'))
            stopping ??= stopEngine().then(() => {
              stoppedAt = performance.now()
            })
        },
      })
      .then(
        (r) => ({ result: r, at: performance.now() }),
        (e: unknown) => ({ error: e, at: performance.now() }),
      )
    const settled = await inflight
    await stopping
    expect(
      'error' in settled,
      `the in-flight command must not report success: ${JSON.stringify(settled)}`,
    ).toBe(true)
    const inflightCode = 'error' in settled ? codeOf(settled.error) : undefined
    expect(['SANDBOX_LOST', 'UNAVAILABLE']).toContain(inflightCode)
    // It settled no later than the engine finished stopping, plus a little: never a hang.
    expect(settled.at - stoppedAt).toBeLessThan(10_000)
    console.log(
      `[engine-restart] in-flight command ended ${inflightCode}: ${(settled as { error: Error }).error.message}`,
    )

    // While the engine is away: a clear error, quickly, naming the engine.
    const t = performance.now()
    const during = await world.executor.execute(world.route('echo during', { sessionId })).then(
      () => undefined,
      (e: unknown) => e,
    )
    const outageMs = performance.now() - t
    expect(during).toBeInstanceOf(AppError)
    expect(['UNAVAILABLE', 'SANDBOX_CREATE_FAILED', 'ACQUIRE_TIMEOUT']).toContain(codeOf(during))
    expect((during as Error).message).toMatch(/Docker engine|docker/i)
    expect(outageMs).toBeLessThan(35_000)
    console.log(`[engine-restart] call during the outage: ${codeOf(during)} after ${outageMs.toFixed(0)} ms`)

    // Engine back: the same session answers again, on a fresh sandbox.
    const restartedAt = performance.now()
    await startEngine()
    const after = await world.executor.execute(
      world.route('echo back; ls marker 2>/dev/null || echo fresh', { sessionId }),
    )
    expect(after.exitCode).toBe(0)
    expect(after.stdout).toBe('back\nfresh\n')
    console.log(
      `[engine-restart] engine start + first command on the rebound session: ${(performance.now() - restartedAt).toFixed(0)} ms`,
    )
    const again = await world.executor.execute(world.route('echo again', { sessionId }))
    expect(again.stdout).toBe('again\n')
  }, 300_000)
})
