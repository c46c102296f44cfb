import { setTimeout as sleep } from 'node:timers/promises'
import type { Redis } from 'ioredis'
import { interruptedResult } from '../fence.js'
import { checkConcurrency, defaultWorkerId, failedResult, runJob } from '../run-job.js'
import type { AnyJobProcessor, RunOutcome } from '../run-job.js'
import type { JobResult, OutputChunk, QueueJob } from '../schemas.js'
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
import type { RedisFenceStore } from '../redis-common/redis-fence.js'
import { type ConsumerTuning, OUTAGE_HANDLING, STALL_DETECTION } from '../redis-common/stall-detection.js'
import type { Subscriber } from '../redis-common/subscriber.js'
import { ChunkHold } from './chunk-hold.js'
import { JobTaker } from './job-store.js'
import type { RedisJobStore, TakenJob } from './job-store.js'
import { StalledSweep } from './stalled-sweep.js'
import { settlesWithin } from '../redis-common/settles-within.js'

/** Stalled-job recovery and shutdown tuning of `redis`-driver consumers. */
export type RedisConsumerTuning = ConsumerTuning

/** How long one blocking pop waits before it is sent again (s); close unblocks it at once. */
const BLOCK_SECONDS = 5
/** Without a backlog seen, one take in this many also looks for more waiting jobs. */
const PROBE_EVERY = 8

interface ConsumerDeps {
  readonly redisUrl: string
  readonly queueName: string
  readonly connectTimeoutMs: number
  readonly store: RedisJobStore
  readonly fences: RedisFenceStore
  /** The client the fences and the store use (fail-fast): its reconnects tell when writes may have been refused. */
  readonly fenceClient: Redis
  readonly subscriber: Subscriber
  readonly tuning: RedisConsumerTuning
  /** What the queue carries: a taken job's payload is parsed by it. */
  readonly kind: AnyJobKind
}

interface Running {
  readonly controller: AbortController
}

/**
 * Starts a consumer of the `redis` driver: takes jobs (blocking pop + take script, one round trip),
 * runs them with fencing, cross-worker cancel and hand-back, keeps their leases alive and sweeps the
 * queue for lapsed ones.
 */
export async function startRedisConsumer(
  deps: ConsumerDeps,
  processor: AnyJobProcessor,
  opts: ConsumeOptions<QueueJob, unknown> = {},
): Promise<Consumer> {
  const workerId = opts.workerId ?? defaultWorkerId()
  const concurrency = checkConcurrency(opts.concurrency, 8)
  const abortGraceMs = deps.tuning.abortGraceMs ?? 5_000
  const leaseMs = deps.tuning.lockDurationMs ?? STALL_DETECTION.lockDurationMs
  const maxStalled = deps.tuning.maxStalledCount ?? 3
  const onError = opts.onError ?? ((): void => undefined)
  const onSkipped = opts.onSkipped
  const skipped = onSkipped
    ? (job: QueueJob, result: JobResult): Promise<void> =>
        onSkipped(job, result).catch((err: unknown) => onError(err, `job ${job.jobId}`))
    : undefined
  const blocking = createRedisClient(deps.redisUrl, 'blocking', `sbx-worker:${workerId}`)
  await connectRedis(blocking, deps.redisUrl, deps.connectTimeoutMs)
  const taker = new JobTaker(blocking, deps.store.keys, workerId, leaseMs)
  const ledger = new OutageLedger(deps.fenceClient)
  const running = new Map<string, Running>()
  const sweep = new StalledSweep(deps.store, {
    workerId,
    leaseMs,
    sweepIntervalMs: deps.tuning.stalledIntervalMs ?? STALL_DETECTION.stalledIntervalMs,
    heldJobs: () => running.keys(),
    onError: (err, context) => {
      if (!isRedisUnreachable(err)) onError(err, `queue worker ${workerId}: ${context}`)
    },
  })
  let closeRequested = false
  let shuttingDown = false
  // Aborted when close() gives up draining: ends the outage holds of jobs being handed back.
  const stopping = new AbortController()
  const slotFreed = new Set<() => void>()

  /** The fence of one attempt: the queue's finish script stores its result and ends the job at once. */
  const fenceOf = (
    data: QueueJob,
    attempt: number,
    finishFailed: { error?: unknown },
    hold: ChunkHold,
  ): JobFence<unknown> => {
    // A job whose last attempt here failed its fence `begin` did not start its command then, whatever
    // the fence record says (the script may have run with its reply lost): this worker may run it.
    const known = ledger.takeUnstarted(data.jobId)
    const base = deps.fences.fence(known ? { ...data, idempotent: true } : data, attempt, workerId)
    return ledger.watchBegin(data.jobId, {
      ...base,
      finish: async (result) => {
        // The attempt's last live chunk rides with its result, unless an earlier chunk waits to be
        // sent again (it would overtake it).
        let last: OutputChunk | undefined
        if (deps.fences.mayCarryChunk(data.jobId)) last = hold.take()
        else hold.flush()
        deps.fences.endOutput(data.jobId)
        try {
          return await deps.store.finish(data.jobId, result, last)
        } catch (err) {
          // The chunk then goes on its own, sent again until Redis takes it (as every chunk is).
          if (last) deps.fences.publishChunk(data.jobId, last)
          // Redis away: the result is kept and stored once Redis is back (see `run`).
          if (!isRedisUnreachable(err)) throw err
          finishFailed.error = err
          return result
        }
      },
    })
  }

  const handBack = async (taken: TakenJob): Promise<void> => {
    // A Redis outage: hold the job until Redis is back, and a little longer each time (handing it
    // back at once would have it taken again into the same outage). Not the job's own signal: it is
    // aborted already (that is how the processor was stopped).
    const signal = stopping.signal
    if (!shuttingDown) {
      await whenReady(deps.fenceClient, OUTAGE_HANDLING.holdMs, signal)
      await sleep(Math.min(250 * taken.attempt, 2_000), undefined, { signal }).catch(() => undefined)
    }
    // Should this fail, the lease lapses and the sweep puts the job back; its fence decides.
    await deps.store.handBack(taken.jobId, taken.attempt).catch((err: unknown) => {
      if (!isRedisUnreachable(err)) onError(err, `handing job ${taken.jobId} back`)
    })
  }

  /** Stores a result Redis could not take when it was reached (an outage touched the attempt). */
  const storeLate = async (jobId: string, result: JobResult): Promise<void> => {
    await whenReady(deps.fenceClient, OUTAGE_HANDLING.holdMs, stopping.signal)
    await deps.store.finish(jobId, result).catch((err: unknown) => {
      // Left to the lease: the sweep puts the job back, and its redelivery here takes this result.
      onError(err, `storing the result of job ${jobId}`)
    })
  }

  const run = async (taken: TakenJob): Promise<void> => {
    const parsed = deps.kind.payload.safeParse(safeJson(taken.data))
    if (!parsed.success) {
      await deps.store.finish(taken.jobId, {
        status: 'failed',
        code: 'BAD_REQUEST',
        message: `Malformed job payload: ${parsed.error.message}`,
        retryable: false,
      })
      return
    }
    const data = parsed.data
    if (taken.stalls > maxStalled) {
      const result = await deps.store.finish(data.jobId, jobGaveUp('job stalled more than allowable limit'))
      await skipped?.(data, result)
      return
    }
    // An attempt here that an outage touched: take its result rather than judge it lost.
    const earlier = ledger.takeResult(data.jobId)
    const kept = earlier && (await earlier)
    if (kept) {
      await deps.store.finish(data.jobId, kept)
      return
    }
    const controller = new AbortController()
    running.set(data.jobId, { controller })
    const finishFailed: { error?: unknown } = {}
    const hold = new ChunkHold((chunk) => deps.fences.publishChunk(data.jobId, chunk))
    const ctx: JobContext<unknown> = {
      signal: controller.signal,
      attempt: taken.attempt,
      workerId,
      fence: fenceOf(data, taken.attempt, finishFailed, hold),
      publish: (chunk) => hold.publish(chunk),
    }
    // Redis went away under the job (the session store or the fence could not be reached): the job is
    // handed back rather than failed, to run once Redis is back; its fence decides.
    const handBackOnOutage = taken.attempt < OUTAGE_HANDLING.maxUnreachableHandbacks
    const guarded: AnyJobProcessor = async (j, c) => {
      try {
        return await processor(j, c)
      } catch (err) {
        const unreachable = isRedisUnreachable(err)
        if (
          handBackOnOutage &&
          !controller.signal.aborted &&
          (unreachable || opts.handBackOn?.(err) === true)
        ) {
          onError(
            err,
            `job ${data.jobId}: ${unreachable ? 'Redis' : 'its engine'} unreachable, handing the job back`,
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
        onError(err, `job ${data.jobId}: Redis unreachable, handing the job back`)
        controller.abort({ kind: 'shutdown' } satisfies JobAbortReason)
        outcome = { kind: 'handback' }
      }
      hold.flush()
      if (outcome.kind === 'result') {
        if (finishFailed.error === undefined && !tracked.outageTouched()) return
        // Redis went away during the job: its result record may not have landed. Keep it for a
        // redelivery here, and store it once Redis is back (first writer wins).
        tracked.keep(outcome.result)
        await storeLate(data.jobId, outcome.result)
        return
      }
      await handBack(taken)
    } catch (err) {
      // Not a job outcome (a bug, or the fence refused): the job ends failed rather than hang.
      onError(err, `job ${data.jobId}`)
      await deps.store
        .finish(data.jobId, failedResult(err))
        .catch((e: unknown) => onError(e, `storing the result of job ${data.jobId}`))
    } finally {
      // A chunk no finish carried (a hand-back, a failed run) goes out as it would have.
      hold.flush()
      tracked.end()
      running.delete(data.jobId)
      for (const f of [...slotFreed]) f()
    }
  }

  const offCancel = await deps.subscriber.on(deps.fences.keys.cancelChannel, (message) => {
    const nl = message.indexOf('\n')
    const jobId = nl < 0 ? message : message.slice(0, nl)
    const reason = nl < 0 ? 'cancelled' : message.slice(nl + 1)
    running.get(jobId)?.controller.abort({ kind: 'cancelled', reason } satisfies JobAbortReason)
  })
  await sweep.start()
  const blockingId = Number(await blocking.client('ID'))

  const waitForSlot = (): Promise<void> =>
    new Promise((resolve) => {
      const done = (): void => {
        slotFreed.delete(done)
        resolve()
      }
      slotFreed.add(done)
    })
  // Jobs taken but whose processing has not settled yet (the count the slots follow).
  let inFlight = 0
  const start = (taken: TakenJob): void => {
    inFlight += 1
    void run(taken)
      .catch((err: unknown) => onError(err, `job ${taken.jobId}`))
      .finally(() => {
        inFlight -= 1
        for (const f of [...slotFreed]) f()
      })
  }
  const whenNoneInFlight = async (): Promise<void> => {
    while (inFlight > 0) await waitForSlot()
  }
  const loop = (async () => {
    // A pop whose take did not run (a connection lost between them) left its job pending: take it first.
    let recover = true
    let backlog = false
    let takes = 0
    while (!closeRequested) {
      if (inFlight >= concurrency) {
        await waitForSlot()
        continue
      }
      try {
        // While a backlog waits, every free slot beyond the first takes a waiting job in the same
        // round trip. Without one, the extra pop would find the list empty (a command for nothing):
        // only one take in PROBE_EVERY looks, and finding jobs there means a backlog.
        const probe: boolean = backlog || ++takes % PROBE_EVERY === 0
        const more: number = probe ? concurrency - inFlight - 1 : 0
        const taken = recover ? await taker.takePending(more) : await taker.take(BLOCK_SECONDS, more)
        if (more > 0) backlog = taken.jobs.length > 1
        for (const job of taken.jobs) start(job)
        if (recover && !taken.popped) recover = false
      } catch (err) {
        if (closeRequested) break
        if (!isRedisUnreachable(err)) onError(err, `queue worker ${workerId}`)
        recover = true
        await sleep(OUTAGE_HANDLING.fetchRetryDelayMs)
      }
    }
  })()

  let closing: Promise<void> | undefined
  const close = async (deadlineMs: number): Promise<void> => {
    closeRequested = true
    for (const f of [...slotFreed]) f()
    // The blocking pop returns at once (nil): the loop ends without taking more.
    // Sent again until the loop ends: an UNBLOCK that arrives before the pop does is a no-op. Should
    // it not end the pop (Redis away, or the connection came back under another client id), the
    // connection is dropped: a job the pop moved meanwhile stays in the pending list, which
    // releaseWorker below puts back, and one the take script leased goes back when its lease lapses.
    for (let tries = 0; ; tries++) {
      if (tries < 3) await deps.fenceClient.client('UNBLOCK', blockingId).catch(() => blocking.disconnect())
      else blocking.disconnect()
      if (await settlesWithin(loop, 100)) break
    }
    if (!(await settlesWithin(whenNoneInFlight(), deadlineMs))) {
      shuttingDown = true
      stopping.abort()
      for (const r of running.values()) r.controller.abort({ kind: 'shutdown' } satisfies JobAbortReason)
      // Processors that ignore the abort: their leases lapse and the sweep puts their jobs back.
      await settlesWithin(whenNoneInFlight(), abortGraceMs)
    }
    sweep.stop()
    await deps.store.releaseWorker(workerId).catch(() => undefined)
    await offCancel()
    ledger.dispose()
    await quitRedis(blocking)
  }

  return {
    workerId,
    get activeCount() {
      return ledger.active
    },
    close: ({ deadlineMs = 30_000 } = {}) => (closing ??= close(deadlineMs)),
  }
}

function safeJson(text: string): unknown {
  try {
    return JSON.parse(text)
  } catch {
    return undefined
  }
}

/** The result of a job the queue gave up on (its lease lapsed more than `maxStalledCount` times). */
export function jobGaveUp(cause: string): JobResult<never> {
  return interruptedResult({ cause })
}
