export type { RouteContext, RouteExecutor, RouteRequest } from './types.js'
export { formatBlocked, formatExecResult, formatToolError, noRouterError } from './tool-result.js'
export { QueueRouteExecutor } from './queue-route-executor.js'
export type { QueueRouteExecutorOptions } from './queue-route-executor.js'
export {
  JobInterruptedError,
  JobNotAcceptedError,
  JobOutcomeUnknownError,
  jobCancelledError,
  unwrapJobResult,
} from './job-errors.js'
export { runToolCall } from './tool-call-pipeline.js'
export type { LocalRun, ToolCallDeps, ToolCallEvent, ToolCallRun, ToolCallVia } from './tool-call-pipeline.js'
export { cwdOf, routeRequestOf } from './route-request.js'
export type { RouteScope } from './route-request.js'
