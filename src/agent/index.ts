export { createAgent } from './agent.js'
export type { Agent } from './agent.js'
export { AGENT_DEFAULTS } from './options.js'
export type { CreateAgentOptions } from './options.js'
export type { RunOptions } from './loop.js'
export type { AgentResult, AgentWarning } from './result.js'
export type { AgentSession, OpenSessionOptions } from './session.js'
export { DEFAULT_COMPACT_INSTRUCTION } from './compact.js'
export type { CompactOptions, CompactResult } from './compact.js'

export { compileTool, defineTool, shellTool } from './define-tool.js'
export { codeTool } from './code-tools.js'
export type { CodeToolBackend, CodeToolOptions } from './code-tools.js'
export { processTools } from './process-tools.js'
export type { ProcessToolBackend, ProcessToolsOptions } from './process-tools.js'
export type {
  CompiledTool,
  JsonSchemaToolDefinition,
  ShellToolOptions,
  ZodToolDefinition,
} from './define-tool.js'
export type { JsonSchema, Tool, ToolExecuteContext } from './tool.js'
export type {
  ChatMessage,
  ModelClient,
  ModelFinishReason,
  ModelRequest,
  ModelResponse,
  ModelToolCall,
  ToolSpec,
  Usage,
} from './model-client.js'
export { scriptedModel, scriptedToolCall } from './scripted-model.js'
export type { ScriptedModel, ScriptedModelOptions, ScriptedStep } from './scripted-model.js'

export { ForcedStop, LoopDecision, finishNow, finishReasonLabel, isForcedStop } from './finish-reason.js'
export type { FinishReason } from './finish-reason.js'
export type {
  AgentInterceptor,
  AgentRun,
  AgentRunState,
  IterationContext,
  IterationResult,
  LlmCallContext,
  Next,
  ToolCallContext,
  ToolCallOutcome,
  ToolCallRecord,
} from './agent-interceptor.js'

export { BudgetInterceptor, DEFAULT_BUDGET_INSTRUCTION } from './budget-interceptor.js'
export type { BudgetInterceptorOptions } from './budget-interceptor.js'
export { costOfCalls, costOfUsage } from './pricing.js'
export type { ModelPrice, PriceTable } from './pricing.js'
export { addUsage, emptyUsage, normalizeUsage } from './usage.js'
export type { LlmCallUsage } from './usage.js'
export { LoggingInterceptor } from './logging-interceptor.js'
export type { LogLevel, LogSink } from './logging-interceptor.js'
export { AGENT_SPANS, TracingInterceptor } from './tracing-interceptor.js'
export type { TracingInterceptorOptions } from './tracing-interceptor.js'

export { AgentConfigError, AgentSessionError, ModelCallError, ToolCallError } from './errors.js'
