import { randomUUID } from 'node:crypto'
import { Redis } from 'ioredis'
import { createBullmqJobQueue, createInProcessJobQueue, deriveJobId } from '../../../src/queue/index.js'
import type { BullmqQueueOptions, ExecJob, JobQueue } from '../../../src/queue/index.js'

/** Redis of this machine (the tests never mock it). */
export const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379'

/** A queue plus what a test needs to clean it up. */
export interface QueueUnderTest {
  readonly queue: JobQueue
  /** Another handle on the same queue (a second process's view; for BullMQ a separate connection set). */
  reopen(): Promise<JobQueue>
  cleanup(): Promise<void>
}

/** Builds a queue of one driver, with a unique key prefix for BullMQ. */
export type QueueFactory = (opts?: Partial<BullmqQueueOptions>) => Promise<QueueUnderTest>

/** Both drivers, for suites that must pass on each. */
export const DRIVERS: ReadonlyArray<readonly [name: string, factory: QueueFactory]> = [
  [
    'in-process',
    async (opts) => {
      const queue = createInProcessJobQueue({ abortGraceMs: opts?.abortGraceMs ?? 5_000 })
      return { queue, reopen: () => Promise.resolve(queue), cleanup: () => queue.close() }
    },
  ],
  ['bullmq', bullmqUnderTest],
]

/** A BullMQ queue on a fresh prefix; cleanup closes every handle and deletes the prefix's keys. */
export async function bullmqUnderTest(opts: Partial<BullmqQueueOptions> = {}): Promise<QueueUnderTest> {
  const prefix = `sbxtest-${randomUUID().slice(0, 8)}`
  const options: BullmqQueueOptions = { redisUrl: REDIS_URL, prefix, queueName: 'exec', ...opts }
  const handles: JobQueue[] = []
  const open = async (): Promise<JobQueue> => {
    const q = await createBullmqJobQueue(options)
    handles.push(q)
    return q
  }
  const queue = await open()
  return {
    queue,
    reopen: open,
    cleanup: async () => {
      await Promise.all(handles.map((q) => q.close()))
      await deleteKeys(`${prefix}:*`)
    },
  }
}

/** Deletes every key matching `pattern`. */
export async function deleteKeys(pattern: string): Promise<void> {
  const redis = new Redis(REDIS_URL)
  try {
    let cursor = '0'
    do {
      const [next, keys] = await redis.scan(cursor, 'MATCH', pattern, 'COUNT', 500)
      cursor = next
      if (keys.length > 0) await redis.del(...keys)
    } while (cursor !== '0')
  } finally {
    redis.disconnect()
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
