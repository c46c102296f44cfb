import { performance } from 'node:perf_hooks'
import { afterEach, describe, expect, test } from 'vitest'
import type { AppError } from '../../../src/errors.js'
import type { RouteRequest } from '../../../src/routing/index.js'
import type { ExecResult } from '../../../src/sandbox/types.js'
import { JobInterruptedError } from '../../../src/routing/index.js'
import { WorkerChild } from '../../support/worker-child.js'
import { createWorld, worldNames } from '../../support/queue-world.js'
import type { World } from '../../support/queue-world.js'

/** The fleet's recovery target: a dead worker's job is picked up in under this. */
const RECOVERY_TARGET_MS = 10_000

describe.each(['bullmq', 'redis'] as const)('two worker processes on one Redis (%s driver)', (driver) => {
  let world: World | undefined
  let workers: WorkerChild[] = []
  afterEach(async () => {
    await Promise.all(workers.map((w) => w.stop()))
    workers = []
    const w = world
    world = undefined
    if (!w) return
    await w.close()
    expect(await w.containers()).toEqual([])
  })

  /** A producer in this process (no worker) and two worker children. */
  async function setup(env: Record<string, string> = {}): Promise<[World, WorkerChild, WorkerChild]> {
    const names = worldNames()
    world = await createWorld({ driver, names, worker: false })
    const childEnv = { SBX_QUEUE_DRIVER: driver, ...env }
    workers = await Promise.all([
      WorkerChild.start(names, 'wa', childEnv),
      WorkerChild.start(names, 'wb', childEnv),
    ])
    const [a, b] = workers as [WorkerChild, WorkerChild]
    return [world, a, b]
  }

  /** Runs `route` and SIGKILLs the worker that runs it once it prints `started`. */
  async function killMidCommand(w: World, route: RouteRequest, all: WorkerChild[]) {
    const jobId = w.executor.jobIdOf(route)
    let killed: { worker: WorkerChild; at: number } | undefined
    let killing: Promise<void> | undefined
    const call = w.executor.execute(route, {
      onStdout: (c) => {
        if (!c.includes('started') || killing) return
        const victim = all.find((x) => x.ran(jobId))
        if (!victim) throw new Error('no worker reported the job')
        killing = victim.kill().then(() => {
          killed = { worker: victim, at: performance.now() }
        })
      },
    })
    const outcome: { result?: ExecResult; error?: unknown } = await call.then(
      (r) => ({ result: r }),
      (e: unknown) => ({ error: e }),
    )
    await killing
    if (!killed) throw new Error('the command finished before it printed "started"')
    return { ...outcome, killed, jobId, doneAt: performance.now() }
  }

  test('both workers serve one session: its files persist whichever worker runs the command', async () => {
    const [w, a, b] = await setup()
    const seen = new Set<string>()
    for (let n = 1; n <= 30 && seen.size < 2; n++) {
      const route = w.route('n=$(cat n 2>/dev/null || echo 0); n=$((n+1)); echo $n > n; echo $n', {
        sessionId: 'shared',
      })
      const r = await w.executor.execute(route)
      expect(r.stdout).toBe(`${n}\n`)
      const job = await w.queue.getResult(w.executor.jobIdOf(route))
      if (job?.status === 'completed') seen.add(job.workerId)
    }
    expect([...seen].sort()).toEqual([a.workerId, b.workerId])
  })

  test('a worker SIGKILLed mid-command: the job ends interrupted within the recovery target, not run twice', async () => {
    const [w, a, b] = await setup()
    const route = w.route('echo run >> runs; echo started; sleep 600', { sessionId: 'k' })
    const { error, killed, doneAt } = await killMidCommand(w, route, [a, b])
    const recoveryMs = doneAt - killed.at
    console.log(`[fleet] SIGKILL -> interrupted result: ${recoveryMs.toFixed(0)} ms`)
    expect(error).toBeInstanceOf(JobInterruptedError)
    const err = error as JobInterruptedError
    expect(err.code).toBe('JOB_INTERRUPTED')
    expect(err.previous?.workerId).toBe(killed.worker.workerId)
    expect(err.partial.stdout).toBe('started\n')
    expect(recoveryMs).toBeLessThan(RECOVERY_TARGET_MS)
    const runs = await w.executor.execute(w.route('wc -l < runs', { sessionId: 'k' }))
    expect(runs.stdout.trim()).toBe('1')
  })

  test('an idempotent job whose worker was SIGKILLed runs again on the other worker and completes exactly once', async () => {
    const [w, a, b] = await setup()
    const route = w.route('echo run >> runs; echo started; sleep 2; echo done >> done; echo finished', {
      sessionId: 'i',
      idempotent: true,
    })
    const { result, error, killed, jobId } = await killMidCommand(w, route, [a, b])
    expect(error).toBeUndefined()
    const survivor = killed.worker === a ? b : a
    const redelivered = await survivor.next((l) => l.event === 'start' && l.jobId === jobId)
    expect(redelivered.attempt).toBeGreaterThan(1)
    expect(result?.stdout).toBe('started\nfinished\n')
    const stored = await w.queue.getResult(jobId)
    expect(stored).toMatchObject({ status: 'completed', workerId: survivor.workerId })
    // Resubmitting returns the stored result: no third run.
    expect(await w.executor.execute(route)).toEqual(result)
    const counts = await w.executor.execute(w.route('wc -l < runs; wc -l < done', { sessionId: 'i' }))
    expect(counts.stdout.split('\n').map((s) => s.trim())).toEqual(['2', '1', ''])
  })

  test('measures redelivery: SIGKILL to the job starting again on the surviving worker', async () => {
    const [w, a, b] = await setup()
    const route = w.route('echo started; sleep 600', { sessionId: 'm', idempotent: true, timeoutMs: 30_000 })
    const jobId = w.executor.jobIdOf(route)
    const ac = new AbortController()
    let killedAt = 0
    let victim: WorkerChild | undefined
    const call = w.executor.execute(route, {
      signal: ac.signal,
      onStdout: (c) => {
        if (!c.includes('started') || victim) return
        victim = [a, b].find((x) => x.ran(jobId))
        void victim?.kill().then(() => (killedAt = performance.now()))
      },
    })
    const done = call.catch((e: unknown) => e)
    const survivor = await new Promise<WorkerChild>((resolve) => {
      for (const x of [a, b])
        void x
          .next((l) => l.event === 'start' && l.jobId === jobId && (l.attempt ?? 1) > 1)
          .then(() => resolve(x))
    })
    const redeliveryMs = performance.now() - killedAt
    console.log(`[fleet] SIGKILL -> redelivered to ${survivor.workerId}: ${redeliveryMs.toFixed(0)} ms`)
    expect(survivor).not.toBe(victim)
    expect(redeliveryMs).toBeLessThan(RECOVERY_TARGET_MS)
    ac.abort('test done')
    expect(((await done) as AppError).code).toBe('JOB_CANCELLED')
  })

  test('a cancel from the producer process reaches the worker process holding the job and kills the command', async () => {
    const [w, a, b] = await setup()
    const route = w.route('echo started; sleep 31337; touch marker', { sessionId: 'x' })
    const jobId = w.executor.jobIdOf(route)
    const ac = new AbortController()
    const err = await w.executor
      .execute(route, {
        signal: ac.signal,
        onStdout: (c) => {
          if (c.includes('started')) ac.abort('stop from the API process')
        },
      })
      .catch((e: unknown) => e)
    expect((err as AppError).code).toBe('JOB_CANCELLED')
    expect([a, b].filter((x) => x.ran(jobId))).toHaveLength(1)
    expect(await w.queue.getResult(jobId)).toEqual({
      status: 'cancelled',
      reason: 'stop from the API process',
    })
    const check = await w.executor.execute(
      w.route('pidof sleep || echo no-sleep; test -e marker && echo marker || echo no-marker', {
        sessionId: 'x',
      }),
    )
    expect(check.stdout).toBe('no-sleep\nno-marker\n')
  })

  test('graceful shutdown past its drain deadline hands the job back; the other worker reports it interrupted', async () => {
    const [w, a, b] = await setup({ SBX_DRAIN_MS: '300' })
    const route = w.route('echo started; sleep 600', { sessionId: 'g' })
    const jobId = w.executor.jobIdOf(route)
    let stopping: Promise<void> | undefined
    let termAt = 0
    const err = await w.executor
      .execute(route, {
        onStdout: (c) => {
          if (!c.includes('started') || stopping) return
          const victim = [a, b].find((x) => x.ran(jobId))
          termAt = performance.now()
          stopping = victim?.stop()
        },
      })
      .catch((e: unknown) => e)
    const handOffMs = performance.now() - termAt
    await stopping
    console.log(`[fleet] SIGTERM (drain 300 ms) -> interrupted result: ${handOffMs.toFixed(0)} ms`)
    expect((err as AppError).code).toBe('JOB_INTERRUPTED')
    // Handed back at once, not left for the stalled checker (lock expiry alone is 4 s).
    expect(handOffMs).toBeLessThan(2_000)
  })
})
