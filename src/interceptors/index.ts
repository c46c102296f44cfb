export { ModelRequestDecision, PromptDecision, ToolCallDecision, ToolResultDecision } from './decisions.js'
export type { ModelRequestOverrides, RouteRun, RouteToDecision } from './decisions.js'
export type {
  InterceptorContext,
  InterceptorStage,
  MaybePromise,
  ModelRequestInterceptor,
  ModelRequestView,
  PromptInterceptor,
  PromptRequest,
  ToolCallInterceptor,
  ToolCallRequest,
} from './types.js'
export { InterceptorError } from './errors.js'
export { evaluateModelRequest, evaluatePrompt, evaluateToolCall, evaluateToolResult } from './chains.js'
export type { ModelRequestVerdict, PromptVerdict, ToolCallVerdict, ToolResultVerdict } from './chains.js'
