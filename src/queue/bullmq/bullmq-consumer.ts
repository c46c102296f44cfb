import { WaitingError, Worker } from 'bullmq'
import type { Job } from 'bullmq'
import { checkConcurrency, defaultWorkerId, runJob } from '../run-job.js'
import { ExecJobSchema } from '../schemas.js'
import type { ExecJobResult } from '../schemas.js'
import type { Consumer, ConsumeOptions, JobAbortReason, JobContext, JobProcessor } from '../types.js'
import { connectRedis, createRedisClient, quitRedis } from './redis-clients.js'
import type { RedisFenceStore } from './redis-fence.js'
import type { Subscriber } from './subscriber.js'

/** Stalled-job recovery and shutdown tuning of BullMQ consumers. */
export interface BullmqConsumerTuning {
  /**
   * Lock TTL of a running job (ms). A dead worker's job is redelivered after its lock expires and the
   * next stalled check runs: at most about lockDurationMs + stalledIntervalMs. @default 4000
   */
  lockDurationMs?: number
  /** Period of the stalled-job check (ms). @default 1500 */
  stalledIntervalMs?: number
  /** Redeliveries of one job before BullMQ gives up on it (reported `interrupted`). @default 3 */
  maxStalledCount?: number
  /** After aborting jobs at shutdown, wait this long for them to be handed back (ms). @default 5000 */
  abortGraceMs?: number
}

interface ConsumerDeps {
  readonly redisUrl: string
  readonly queueName: string
  readonly prefix: string
  readonly connectTimeoutMs: number
  readonly fences: RedisFenceStore
  readonly subscriber: Subscriber
  readonly tuning: BullmqConsumerTuning
}

/** Starts a BullMQ Worker that runs `processor` with fencing, cross-worker cancel and hand-back. */
export async function startBullmqConsumer(
  deps: ConsumerDeps,
  processor: JobProcessor,
  opts: ConsumeOptions = {},
): Promise<Consumer> {
  const workerId = opts.workerId ?? defaultWorkerId()
  const concurrency = checkConcurrency(opts.concurrency, 8)
  const abortGraceMs = deps.tuning.abortGraceMs ?? 5_000
  const client = createRedisClient(deps.redisUrl, 'blocking', `sbx-worker:${workerId}`)
  await connectRedis(client, deps.redisUrl, deps.connectTimeoutMs)
  let closeRequested = false
  let shuttingDown = false
  let active = 0

  // Three declared parameters: BullMQ passes the job's AbortSignal only to such processors.
  const bullProcessor = async (job: Job, token?: string, signal?: AbortSignal): Promise<ExecJobResult> => {
    const parsed = ExecJobSchema.safeParse(job.data)
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
    const ctx: JobContext = {
      signal: controller.signal,
      attempt,
      workerId,
      fence: deps.fences.fence(data, attempt, workerId, { pipelinedFinish: true }),
      publish: (chunk) => deps.fences.publishChunk(data.jobId, chunk),
    }
    active += 1
    try {
      const outcome = await runJob(processor, data, ctx)
      if (outcome.kind === 'result') return outcome.result
      // Hand the job back now rather than waiting for the stalled checker; its fence decides its fate.
      await job.moveToWait(token)
      throw new WaitingError()
    } finally {
      active -= 1
      signal?.removeEventListener('abort', onAbort)
    }
  }

  const worker = new Worker(deps.queueName, bullProcessor, {
    connection: client,
    prefix: deps.prefix,
    name: workerId,
    concurrency,
    lockDuration: deps.tuning.lockDurationMs ?? 4_000,
    stalledInterval: deps.tuning.stalledIntervalMs ?? 1_500,
    maxStalledCount: deps.tuning.maxStalledCount ?? 3,
    autorun: true,
  })
  // Mostly transient connection problems BullMQ retries itself; an unhandled 'error' would crash.
  worker.on('error', (err) => opts.onError?.(err, `queue worker ${workerId}`))

  const offCancel = await deps.subscriber.on(deps.fences.keys.cancelChannel, (message) => {
    const nl = message.indexOf('\n')
    const jobId = nl < 0 ? message : message.slice(0, nl)
    worker.cancelJob(jobId, nl < 0 ? 'cancelled' : message.slice(nl + 1))
  })
  await worker.waitUntilReady()

  let closing: Promise<void> | undefined
  const close = async (deadlineMs: number): Promise<void> => {
    closeRequested = true
    const closed = worker.close()
    if (!(await settlesWithin(closed, deadlineMs))) {
      shuttingDown = true
      worker.cancelAllJobs('shutdown')
      // Processors that ignore the abort: force-close; their locks lapse and the stalled checker redelivers.
      if (!(await settlesWithin(closed, abortGraceMs))) await worker.close(true)
    }
    await offCancel()
    await quitRedis(client)
  }

  return {
    workerId,
    get activeCount() {
      return active
    },
    close: ({ deadlineMs = 30_000 } = {}) => (closing ??= close(deadlineMs)),
  }
}

async function settlesWithin(p: Promise<unknown>, ms: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined
  const timeout = new Promise<false>((resolve) => (timer = setTimeout(() => resolve(false), ms)))
  try {
    return await Promise.race([p.then(() => true), timeout])
  } finally {
    clearTimeout(timer)
  }
}
