export type { RouteContext, RouteExecutor, RouteRequest } from './types.js'
export { formatExecResult, formatToolError } from './tool-result.js'
export { QueueRouteExecutor } from './queue-route-executor.js'
export type { QueueRouteExecutorOptions } from './queue-route-executor.js'
export { staticRouteTargets } from './route-targets.js'
export type { RouteTargets } from './route-targets.js'
export {
  JobInterruptedError,
  JobNotAcceptedError,
  JobOutcomeUnknownError,
  jobCancelledError,
  unwrapJobResult,
} from './job-errors.js'
export { executeRoutedToolCall } from './execute-routed-tool-call.js'
export type { RoutedToolCallInput, RoutedToolCallOutcome } from './execute-routed-tool-call.js'
