import { afterEach, describe, expect, test } from 'vitest'
import { AppError } from '../../../src/errors.js'
import { createInProcessJobQueue } from '../../../src/queue/index.js'
import type { ExecJobResult, JobProcessor, JobQueue } from '../../../src/queue/index.js'
import {
  JobInterruptedError,
  JobNotAcceptedError,
  JobOutcomeUnknownError,
  QueueRouteExecutor,
} from '../../../src/routing/index.js'
import type { RouteRequest } from '../../../src/routing/index.js'
import { ProfileCatalog, resolveProfile } from '../../../src/sandbox/profiles.js'

const targets = new ProfileCatalog(
  ['docker'],
  [
    resolveProfile('default', {
      provider: 'docker',
      defaultTimeoutMs: 1_000,
      maxTimeoutMs: 5_000,
      outputCapBytes: 4096,
    }),
    resolveProfile('remote', { provider: 'e2b' }),
  ],
)

const route = (over: Partial<RouteRequest> = {}): RouteRequest => ({
  providerId: 'docker',
  profile: 'default',
  command: 'echo hi',
  callId: `c-${Math.random()}`,
  toolName: 'bash',
  ...over,
})

const completed = (stdout: string): ExecJobResult => ({
  status: 'completed',
  attempt: 1,
  workerId: 'w',
  result: {
    exitCode: 0,
    stdout,
    stderr: '',
    timedOut: false,
    truncated: false,
    durationMs: 1,
    sandboxId: 'sb',
  },
})

async function failure(p: Promise<unknown>): Promise<AppError> {
  const e = await p.then(
    () => new Error('expected a failure'),
    (err: unknown) => err,
  )
  if (!(e instanceof AppError)) throw e
  return e
}

describe('QueueRouteExecutor', () => {
  let queue: JobQueue
  afterEach(() => queue.close())

  const withProcessor = async (
    p: JobProcessor,
    opts: { waitMarginMs?: number } = {},
  ): Promise<QueueRouteExecutor> => {
    queue = createInProcessJobQueue()
    await queue.consume(p)
    return new QueueRouteExecutor({ queue, targets, ...opts })
  }

  test('builds the job: id from tenant + callId, timeout clamped, cap from the profile', () => {
    queue = createInProcessJobQueue()
    const ex = new QueueRouteExecutor({ queue, targets, defaultTenant: 'acme' })
    const job = ex.buildJob(
      route({ callId: 'c1', timeoutMs: 60_000, env: { A: '1' }, cwd: '/tmp', sessionId: 's' }),
    )
    expect(job).toMatchObject({
      tenant: 'acme',
      timeoutMs: 5_000,
      outputCapBytes: 4096,
      idempotent: false,
      sessionId: 's',
    })
    expect(job.jobId).toBe(ex.buildJob(route({ callId: 'c1' })).jobId)
    expect(ex.buildJob(route({ callId: 'c1', tenant: 'globex' })).jobId).not.toBe(job.jobId)
    expect(ex.effectiveTimeoutMs(route())).toBe(1_000)
    expect(() => ex.effectiveTimeoutMs(route({ timeoutMs: -1 }))).toThrow(/positive integer/)
  })

  test('a profile of another provider is unknown for this one', () => {
    queue = createInProcessJobQueue()
    const ex = new QueueRouteExecutor({ queue, targets })
    expect(() => ex.buildJob(route({ profile: 'remote' }))).toThrow(/known profiles: default/)
  })

  test('job outcomes map to AppErrors: interrupted, cancelled, failed', async () => {
    const outcomes: Record<string, ExecJobResult> = {
      interrupted: {
        status: 'interrupted',
        message: 'The command may have run.',
        previous: { attempt: 1, workerId: 'w1', startedAt: 0 },
        stdout: 'partial',
        stderr: '',
      },
      cancelled: { status: 'cancelled', reason: 'stop' },
      failed: { status: 'failed', code: 'ACQUIRE_TIMEOUT', message: 'no sandbox', retryable: true },
    }
    const ex = await withProcessor((job) => Promise.resolve(outcomes[job.command] ?? completed('?')))
    const i = await failure(ex.execute(route({ command: 'interrupted' })))
    expect(i).toBeInstanceOf(JobInterruptedError)
    expect(i.message).toContain('partial')
    expect((i as JobInterruptedError).previous?.workerId).toBe('w1')
    expect((await failure(ex.execute(route({ command: 'cancelled' })))).code).toBe('JOB_CANCELLED')
    const f = await failure(ex.execute(route({ command: 'failed' })))
    expect([f.code, f.retryable]).toEqual(['ACQUIRE_TIMEOUT', true])
  })

  test('live output is topped up from the final result when chunks were missed', async () => {
    const ex = await withProcessor((_job, ctx) => {
      ctx.publish({ stream: 'stdout', data: 'ab' })
      return Promise.resolve(completed('abcdef'))
    })
    const chunks: string[] = []
    const r = await ex.execute(route(), { onStdout: (c) => chunks.push(c) })
    expect(r.stdout).toBe('abcdef')
    expect(chunks).toEqual(['ab', 'cdef'])
  })

  test('an aborted signal before submit throws JOB_CANCELLED and submits nothing', async () => {
    const ex = await withProcessor(() => Promise.resolve(completed('x')))
    const ac = new AbortController()
    ac.abort()
    expect((await failure(ex.execute(route(), { signal: ac.signal }))).code).toBe('JOB_CANCELLED')
    expect(await queue.counts()).toEqual({ waiting: 0, active: 0 })
  })

  test('no result by the deadline: QUEUE_UNAVAILABLE, and the job is cancelled so it never runs later', async () => {
    queue = createInProcessJobQueue()
    const ex = new QueueRouteExecutor({ queue, targets, waitMarginMs: 1 })
    const r = route({ timeoutMs: 20 })
    const err = await failure(ex.execute(r))
    expect(err.code).toBe('QUEUE_UNAVAILABLE')
    expect(err.retryable).toBe(true)
    // Accepted, so the error says which job it was and that it may have run.
    expect(err).toBeInstanceOf(JobOutcomeUnknownError)
    expect((err as JobOutcomeUnknownError).jobId).toBe(ex.jobIdOf(r))
    expect(err.message).toContain(`Accepted as job ${ex.jobIdOf(r)}`)
    expect(err.message).toMatch(/may have run/)
    await expect(queue.wait(ex.jobIdOf(r), { timeoutMs: 1_000 })).resolves.toMatchObject({
      status: 'cancelled',
    })
  })

  test('a queue that refuses the job: JobNotAcceptedError, and onAccepted is never called', async () => {
    queue = createInProcessJobQueue()
    await queue.close()
    const ex = new QueueRouteExecutor({ queue, targets })
    const accepted: string[] = []
    const err = await failure(ex.execute(route(), { onAccepted: (id) => accepted.push(id) }))
    expect(err).toBeInstanceOf(JobNotAcceptedError)
    expect(err.code).toBe('QUEUE_UNAVAILABLE')
    expect(accepted).toEqual([])
  })

  test('onAccepted gets the job id before the result', async () => {
    queue = createInProcessJobQueue()
    await queue.consume(async () => completed('ok\n'))
    const ex = new QueueRouteExecutor({ queue, targets })
    const r = route()
    const accepted: string[] = []
    await expect(ex.execute(r, { onAccepted: (id) => accepted.push(id) })).resolves.toMatchObject({
      stdout: 'ok\n',
    })
    expect(accepted).toEqual([ex.jobIdOf(r)])
  })
})
