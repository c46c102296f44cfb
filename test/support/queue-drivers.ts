import { randomUUID } from 'node:crypto'
import {
  createBullmqJobQueue,
  createInProcessJobQueue,
  createRedisJobQueue,
  deriveJobId,
} from '../../src/queue/index.js'
import type { BullmqQueueOptions, ExecJob, JobQueue } from '../../src/queue/index.js'
import { deleteKeys, REDIS_URL } from './redis.js'

/** A queue plus what a test needs to clean it up. */
export interface QueueUnderTest {
  readonly queue: JobQueue
  /** The Redis key prefix of the queue (Redis drivers). */
  readonly prefix?: string
  /** Another handle on the same queue (a second process's view; for BullMQ a separate connection set). */
  reopen(): Promise<JobQueue>
  cleanup(): Promise<void>
}

/** Builds a queue of one driver, with a unique key prefix for BullMQ. */
export type QueueFactory = (opts?: Partial<BullmqQueueOptions>) => Promise<QueueUnderTest>

/** Every driver, for suites that must pass on each. */
export const DRIVERS: ReadonlyArray<readonly [name: string, factory: QueueFactory]> = [
  [
    'in-process',
    async (opts) => {
      const queue = createInProcessJobQueue({ abortGraceMs: opts?.abortGraceMs ?? 5_000 })
      return { queue, reopen: () => Promise.resolve(queue), cleanup: () => queue.close() }
    },
  ],
  ['bullmq', bullmqUnderTest],
  ['redis', (opts) => redisUnderTest(opts)],
]

/** A BullMQ queue on a fresh prefix; cleanup closes every handle and deletes the prefix's keys. */
export function bullmqUnderTest(opts: Partial<BullmqQueueOptions> = {}): Promise<QueueUnderTest> {
  return redisBackedUnderTest(createBullmqJobQueue, opts)
}

/** A `redis`-driver queue on a fresh prefix; cleanup closes every handle and deletes the prefix's keys. */
export function redisUnderTest(opts: Partial<BullmqQueueOptions> = {}): Promise<QueueUnderTest> {
  return redisBackedUnderTest(createRedisJobQueue, opts)
}

async function redisBackedUnderTest(
  create: (o: BullmqQueueOptions) => Promise<JobQueue>,
  opts: Partial<BullmqQueueOptions>,
): Promise<QueueUnderTest> {
  const prefix = `sbxtest-${randomUUID().slice(0, 8)}`
  const options: BullmqQueueOptions = { redisUrl: REDIS_URL, prefix, queueName: 'exec', ...opts }
  const handles: JobQueue[] = []
  const open = async (): Promise<JobQueue> => {
    const q = await create(options)
    handles.push(q)
    return q
  }
  const queue = await open()
  return {
    queue,
    prefix,
    reopen: open,
    cleanup: async () => {
      await Promise.all(handles.map((q) => q.close()))
      await deleteKeys(`${prefix}:*`)
    },
  }
}

/** A job with defaults filled in. */
export function makeJob(command: string, over: Partial<ExecJob> = {}): ExecJob {
  const tenant = over.tenant ?? 'acme'
  const callId = over.callId ?? `call-${randomUUID()}`
  return {
    jobId: deriveJobId(tenant, callId),
    tenant,
    providerId: 'docker',
    profile: 'default',
    command,
    timeoutMs: 10_000,
    outputCapBytes: 1 << 20,
    idempotent: false,
    callId,
    toolName: 'bash',
    submittedAt: Date.now(),
    ...over,
  }
}
