import { setTimeout as sleep } from 'node:timers/promises'
import { WaitingError, Worker } from 'bullmq'
import type { Job } from 'bullmq'
import type { Redis } from 'ioredis'
import { interruptedResult } from '../fence.js'
import { checkConcurrency, defaultWorkerId, runJob } from '../run-job.js'
import type { AnyJobProcessor, RunOutcome } from '../run-job.js'
import type { JobResult, QueueJob } from '../schemas.js'
import type { AnyJobKind } from '../job-kind.js'
import type { Consumer, ConsumeOptions, JobAbortReason, JobContext, JobFence } from '../types.js'
import {
  connectRedis,
  createRedisClient,
  isRedisUnreachable,
  quitRedis,
  whenReady,
} from '../../redis/index.js'
import { OutageLedger } from '../redis-common/outage-ledger.js'
import { type ConsumerTuning, OUTAGE_HANDLING, STALL_DETECTION } from '../redis-common/stall-detection.js'
import type { RedisFenceStore } from '../redis-common/redis-fence.js'
import type { Subscriber } from '../redis-common/subscriber.js'
import { settlesWithin } from '../redis-common/settles-within.js'

export { STALL_DETECTION } from '../redis-common/stall-detection.js'

/** Stalled-job recovery and shutdown tuning of BullMQ consumers. */
export type BullmqConsumerTuning = ConsumerTuning

interface ConsumerDeps {
  readonly redisUrl: string
  readonly queueName: string
  readonly prefix: string
  readonly connectTimeoutMs: number
  readonly fences: RedisFenceStore
  /** The client the fences use (fail-fast): its reconnects tell when fence writes may have been refused. */
  readonly fenceClient: Redis
  readonly subscriber: Subscriber
  readonly tuning: BullmqConsumerTuning
  /** What the queue carries: a job's payload is parsed by it. */
  readonly kind: AnyJobKind
}

/** Starts a BullMQ Worker that runs `processor` with fencing, cross-worker cancel and hand-back. */
export async function startBullmqConsumer(
  deps: ConsumerDeps,
  processor: AnyJobProcessor,
  opts: ConsumeOptions<QueueJob, unknown> = {},
): Promise<Consumer> {
  const workerId = opts.workerId ?? defaultWorkerId()
  const concurrency = checkConcurrency(opts.concurrency, 8)
  const abortGraceMs = deps.tuning.abortGraceMs ?? 5_000
  const client = createRedisClient(deps.redisUrl, 'blocking', `sbx-worker:${workerId}`)
  await connectRedis(client, deps.redisUrl, deps.connectTimeoutMs)
  let closeRequested = false
  const onSkipped = opts.onSkipped
  const skipped = onSkipped
    ? (job: QueueJob, result: JobResult): Promise<void> =>
        onSkipped(job, result).catch((err: unknown) => opts.onError?.(err, `job ${job.jobId}`))
    : undefined
  let shuttingDown = false
  const ledger = new OutageLedger(deps.fenceClient)
  // A job whose last attempt here failed its fence `begin` did not start its command then, whatever
  // the fence record says (the script may have run with its reply lost): this worker may run it.
  const startKnownFence = (data: QueueJob, attempt: number): JobFence<unknown> => {
    const known = ledger.takeUnstarted(data.jobId)
    const fence = deps.fences.fence(known ? { ...data, idempotent: true } : data, attempt, workerId, {
      pipelinedFinish: true,
    })
    return ledger.watchBegin(data.jobId, fence)
  }

  // Three declared parameters: BullMQ passes the job's AbortSignal only to such processors.
  const bullProcessor = async (job: Job, token?: string, signal?: AbortSignal): Promise<JobResult> => {
    const parsed = deps.kind.payload.safeParse(job.data)
    if (!parsed.success) {
      return {
        status: 'failed',
        code: 'BAD_REQUEST',
        message: `Malformed job payload: ${parsed.error.message}`,
        retryable: false,
      }
    }
    const data = parsed.data
    if (closeRequested) {
      // A fetch that was in flight when close() began delivered a job: give it straight back.
      await job.moveToWait(token)
      throw new WaitingError()
    }
    // An attempt here that an outage touched: take its result rather than judge it lost.
    const earlier = ledger.takeResult(data.jobId)
    const result = earlier && (await earlier)
    if (result) {
      // Store it if the first attempt could not (first writer wins: a stored result is kept).
      return await deps.fences
        .fence(data, Math.max(1, job.attemptsStarted), workerId)
        .finish(result)
        .catch(() => result)
    }
    const controller = new AbortController()
    const onAbort = (): void => {
      const why: unknown = signal?.reason
      const reason: JobAbortReason = shuttingDown
        ? { kind: 'shutdown' }
        : { kind: 'cancelled', reason: typeof why === 'string' ? why : 'cancelled' }
      controller.abort(reason)
    }
    if (signal?.aborted) onAbort()
    else signal?.addEventListener('abort', onAbort, { once: true })
    const attempt = Math.max(1, job.attemptsStarted)
    const ctx: JobContext<unknown> = {
      signal: controller.signal,
      attempt,
      workerId,
      fence: startKnownFence(data, attempt),
      publish: (chunk) => deps.fences.publishChunk(data.jobId, chunk),
    }
    // Redis went away under the job (the session store or the fence could not be reached): the job is
    // handed back rather than failed, to run once Redis is back; its fence decides (an attempt that
    // may have started the command is not run again unless the route is idempotent).
    const handBackOnOutage = attempt < OUTAGE_HANDLING.maxUnreachableHandbacks
    const guarded: AnyJobProcessor = async (j, c) => {
      try {
        return await processor(j, c)
      } catch (err) {
        const handBack = isRedisUnreachable(err) || opts.handBackOn?.(err) === true
        if (handBackOnOutage && !controller.signal.aborted && handBack) {
          opts.onError?.(
            err,
            `job ${data.jobId}: ${isRedisUnreachable(err) ? 'Redis' : 'its engine'} unreachable, handing the job back`,
          )
          controller.abort({ kind: 'shutdown' } satisfies JobAbortReason)
        }
        throw err
      }
    }
    const tracked = ledger.track(data.jobId)
    try {
      let outcome: RunOutcome
      try {
        outcome = await runJob(guarded, data, ctx, skipped)
      } catch (err) {
        // The fence itself could not be read (a redelivery's inspect): same hand-back.
        if (!handBackOnOutage || !isRedisUnreachable(err)) throw err
        opts.onError?.(err, `job ${data.jobId}: Redis unreachable, handing the job back`)
        controller.abort({ kind: 'shutdown' } satisfies JobAbortReason)
        outcome = { kind: 'handback' }
      }
      if (outcome.kind === 'result') {
        if (!tracked.outageTouched()) return outcome.result
        tracked.keep(outcome.result)
        // Redis went away during the job: the result record (sent without waiting) may have been
        // refused. Store it once Redis is back, before BullMQ's completion: if the job lock lapsed
        // meanwhile, the redelivery then returns this result instead of running or fencing the job.
        await whenReady(deps.fenceClient, OUTAGE_HANDLING.holdMs, signal)
        return await deps.fences
          .fence(data, attempt, workerId)
          .finish(outcome.result)
          .catch(() => outcome.result)
      }
      // A Redis outage: hold the job until Redis is back, and a little longer each time (handing it
      // back at once would have it redelivered into the same outage, again and again).
      if (!shuttingDown) {
        await whenReady(deps.fenceClient, OUTAGE_HANDLING.holdMs, signal)
        await sleep(Math.min(250 * attempt, 2_000), undefined, signal ? { signal } : {}).catch(
          () => undefined,
        )
      }
      // Hand the job back now rather than waiting for the stalled checker; its fence decides its fate.
      await job.moveToWait(token)
      throw new WaitingError()
    } finally {
      tracked.end()
      signal?.removeEventListener('abort', onAbort)
    }
  }

  const worker = new Worker(deps.queueName, bullProcessor, {
    connection: client,
    prefix: deps.prefix,
    name: workerId,
    concurrency,
    lockDuration: deps.tuning.lockDurationMs ?? STALL_DETECTION.lockDurationMs,
    stalledInterval: deps.tuning.stalledIntervalMs ?? STALL_DETECTION.stalledIntervalMs,
    maxStalledCount: deps.tuning.maxStalledCount ?? 3,
    runRetryDelay: OUTAGE_HANDLING.fetchRetryDelayMs,
    autorun: true,
  })
  // Mostly transient connection problems BullMQ retries itself; an unhandled 'error' would crash.
  worker.on('error', (err) => opts.onError?.(err, `queue worker ${workerId}`))
  // A job BullMQ failed (stalled too often, or handed back into outages too often) never reaches
  // runJob's finish: its result goes through the fence here, which publishes it to the waiters
  // (first writer wins, so a result an attempt stored stands). Should this write not land, a wait
  // still finds the failure in the job itself when it checks (on reconnect, at its deadline).
  worker.on('failed', (job, err) => {
    const parsed = deps.kind.payload.safeParse(job?.data)
    if (!job || !parsed.success) return
    deps.fences
      .fence(parsed.data, Math.max(1, job.attemptsStarted), workerId)
      .finish(queueGaveUp(job.failedReason || err.message))
      .then((result) => skipped?.(parsed.data, result))
      .catch((e: unknown) => opts.onError?.(e, `storing the result of failed job ${parsed.data.jobId}`))
  })

  const offCancel = await deps.subscriber.on(deps.fences.keys.cancelChannel, (message) => {
    const nl = message.indexOf('\n')
    const jobId = nl < 0 ? message : message.slice(0, nl)
    worker.cancelJob(jobId, nl < 0 ? 'cancelled' : message.slice(nl + 1))
  })
  await worker.waitUntilReady()

  let closing: Promise<void> | undefined
  const close = async (deadlineMs: number): Promise<void> => {
    closeRequested = true
    // Not BullMQ's graceful close: it waits on the blocking connection's disconnect, which never comes
    // while that connection sits between reconnect attempts (Redis away or just back), and a forced
    // close cannot cut short a graceful one under way. Stop fetching, drain our jobs, then force-close.
    await worker.pause(true)
    if (!(await settlesWithin(ledger.whenIdle(), deadlineMs))) {
      shuttingDown = true
      worker.cancelAllJobs('shutdown')
      // Processors that ignore the abort: force-close anyway; their locks lapse and the stalled
      // checker redelivers.
      await settlesWithin(ledger.whenIdle(), abortGraceMs)
    }
    // Let BullMQ send the completions of the jobs that just returned (microtasks) before closing.
    await new Promise<void>((resolve) => setImmediate(resolve))
    await worker.close(true)
    await offCancel()
    ledger.dispose()
    await quitRedis(client)
  }

  return {
    workerId,
    get activeCount() {
      return ledger.active
    },
    close: ({ deadlineMs = 30_000 } = {}) => (closing ??= close(deadlineMs)),
  }
}

/** The result of a job BullMQ failed (stalled too often, or handed back into outages too often). */
export function queueGaveUp(failedReason: string): JobResult<never> {
  return interruptedResult({ cause: failedReason })
}
