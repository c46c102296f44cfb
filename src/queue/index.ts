export type {
  AlongsideWrite,
  Consumer,
  ConsumeOptions,
  FenceOutcome,
  JobInfo,
  JobAbortReason,
  JobContext,
  JobFence,
  JobKind,
  JobProcessor,
  JobQueue,
  QueueDriver,
  SetIfAbsent,
  SubmitOrGetOptions,
  SubmitOrGetOutcome,
  Unsubscribe,
  WaitOptions,
} from './types.js'
export {
  ErrorCodeSchema,
  ExecJobResultSchema,
  ExecJobSchema,
  ExecResultSchema,
  FenceRecordSchema,
  JobResultSchema,
  jobResultSchema,
} from './schemas.js'
export type {
  ExecJob,
  ExecJobResult,
  FenceRecord,
  JobResult,
  LoggedChunk,
  OutputChunk,
  QueueJob,
} from './schemas.js'
export { EXEC_JOBS } from './job-kind.js'
export { deriveJobId, isJobId } from './job-id.js'
export { createMemoryFenceStore, decideFence, interruptedResult, resultOfOutcome } from './fence.js'
export type { FenceSnapshot, InterruptedInfo, MemoryFenceStore, MemoryFenceStoreOptions } from './fence.js'
export { abortReasonOf, failedResult } from './run-job.js'
export { createInProcessJobQueue } from './in-process-queue.js'
export type { InProcessQueueOptions } from './in-process-queue.js'
export { createBullmqJobQueue } from './bullmq/bullmq-queue.js'
export type { BullmqQueueOptions } from './bullmq/bullmq-queue.js'
export type { BullmqConsumerTuning } from './bullmq/bullmq-consumer.js'
export { createRedisJobQueue } from './redis/redis-queue.js'
export type { RedisQueueOptions } from './redis/redis-queue.js'
export type { RedisConsumerTuning } from './redis/redis-consumer.js'
export { createJobQueue } from './create-job-queue.js'
export type { JobQueueConfig } from './create-job-queue.js'
