import { ExecJobResultSchema, ExecJobSchema } from './schemas.js'
import type { ExecJob, ExecResult, QueueJob } from './schemas.js'
import type { JobKind } from './types.js'

/** Routed commands: the kind every driver carries unless told otherwise (queue `sbx-exec`). */
export const EXEC_JOBS: JobKind<ExecJob, ExecResult> = {
  name: 'exec',
  payload: ExecJobSchema,
  result: ExecJobResultSchema,
}

/** A job kind as the drivers hold it: payloads and results are checked by its schemas, not by types. */
export type AnyJobKind = JobKind<QueueJob, unknown>

/** The kind a driver was given, erased for its internals (the schemas keep checking at run time). */
export function anyKind<TJob extends QueueJob, TValue>(kind: JobKind<TJob, TValue>): AnyJobKind {
  return kind as unknown as AnyJobKind
}
