export { createExecProcessor, sessionKeyOf } from './exec-processor.js'
export type { ExecProcessor, ExecProcessorOptions, WorkerErrorHandler } from './exec-processor.js'
export { startExecWorker } from './exec-worker.js'
export type { ExecWorkerEvent, ExecWorkerHandle, ExecWorkerOptions } from './exec-worker.js'
