// The public API of sandbox-router, exported by name: what the docs (README.md, docs/) and their
// samples name for users. Helpers the service uses internally (secret scanning, usage arithmetic, zod
// schemas of options, the config loader, …) stay in their modules; tests import them from there.

// Errors: one base class with a stable code (docs/http-api.md lists the codes)
export { AppError } from './errors.js'
export type { AppErrorOptions, ErrorCode } from './errors.js'

// Decision core
export {
  InterceptorError,
  ModelRequestDecision,
  PromptDecision,
  ToolCallDecision,
  ToolResultDecision,
  evaluateModelRequest,
  evaluatePrompt,
  evaluateToolCall,
  evaluateToolResult,
} from './interceptors/index.js'
export type {
  InterceptorContext,
  InterceptorStage,
  ModelRequestInterceptor,
  ModelRequestOverrides,
  ModelRequestVerdict,
  ModelRequestView,
  PromptInterceptor,
  PromptRequest,
  PromptVerdict,
  RouteRun,
  RouteToDecision,
  ToolCallInterceptor,
  ToolCallRequest,
  ToolCallVerdict,
  ToolResultVerdict,
} from './interceptors/index.js'
export {
  forceWorkingDirectory,
  piiRedactor,
  routeCodeTools,
  routeShellTools,
  secretScanner,
  tenantScope,
} from './interceptors/builtins/index.js'
export type {
  ForceWorkingDirectoryOptions,
  PiiRedactorOptions,
  RouteCodeToolsOptions,
  RouteShellToolsOptions,
  SecretScannerOptions,
  TenantScopeOptions,
} from './interceptors/builtins/index.js'

// Extensions
export {
  ExtensionCapability,
  ExtensionError,
  ExtensionRegistry,
  composeInterceptors,
  defineExtension,
  matchesToolName,
} from './extensions/index.js'
export type {
  AppliedExtension,
  Extension,
  ExtensionCommand,
  ExtensionContext,
  ExtensionContributions,
  ExtensionGuardrail,
  ExtensionManifest,
  ExtensionPrompt,
  ExtensionSkill,
  ExtensionSnapshot,
  HostInterceptors,
  InterceptorChains,
} from './extensions/index.js'

// Lifecycle
export { LifecycleDispatcher, LifecycleEventType } from './lifecycle/index.js'
export type { LifecycleEvent, LifecycleEventInit, LifecycleHook } from './lifecycle/index.js'

// Model clients
export { anthropic, openAICompatible } from './agent/models/index.js'
export type { AnthropicOptions, OpenAICompatibleOptions } from './agent/models/index.js'

// Egress allowlists and brokered credentials (docs/egress.md)
export {
  EgressPolicySchema,
  EgressProxy,
  EgressRuleError,
  decideEgress,
  compileEgress,
  parseEgressRule,
} from './egress/index.js'
export type { EgressAuditEvent, EgressPolicy, EgressPolicyInput, EgressVerdict } from './egress/index.js'

// Sandboxes (the Docker provider is exported from `sandbox-router/docker`, the conformance suite from
// `sandbox-router/conformance`)
export { resolveProfile, Semaphore } from './sandbox/index.js'
export { ProviderRegistry } from './sandbox/registry.js'
export type { ProfileResolver, ProviderResolver, ResolvedRoute } from './sandbox/resolver.js'
export type {
  CreateOptions,
  ExecOptions,
  ExecRequest,
  ExecResult,
  Labels,
  OutputSlice,
  ProcessInfo,
  ProcessOutput,
  ProcessStartRequest,
  ProfileInput,
  ResolvedProfile,
  Sandbox,
  SandboxHealth,
  SandboxProcesses,
  SandboxProvider,
  SandboxRef,
} from './sandbox/index.js'

// Session pool: binds a session to one sandbox, fleet-wide (for a worker of your own)
export { createSessionPool, MemorySessionStore, RedisSessionStore } from './sessions/index.js'
export type {
  AcquireOptions,
  CreateSessionPoolOptions,
  Lease,
  LeaseOutcome,
  RedisSessionStoreOptions,
  SessionKey,
  SessionPool,
  SessionPoolOptions,
  SessionStore,
} from './sessions/index.js'

// Agent loop
export {
  AgentConfigError,
  AgentSessionError,
  BudgetInterceptor,
  ForcedStop,
  LoggingInterceptor,
  LoopDecision,
  ModelCallError,
  TracingInterceptor,
  createAgent,
  defineTool,
  finishNow,
  scriptedModel,
  scriptedToolCall,
  processTools,
  shellTool,
} from './agent/index.js'
export type {
  Agent,
  AgentInterceptor,
  AgentResult,
  AgentRun,
  AgentRunState,
  AgentSession,
  AgentWarning,
  BudgetInterceptorOptions,
  ChatMessage,
  CompactOptions,
  CompactResult,
  CreateAgentOptions,
  FinishReason,
  IterationContext,
  IterationResult,
  JsonSchema,
  JsonSchemaToolDefinition,
  LlmCallContext,
  LlmCallUsage,
  LogLevel,
  LogSink,
  ModelClient,
  ModelFinishReason,
  ModelPrice,
  ModelRequest,
  ModelResponse,
  ModelToolCall,
  Next,
  OpenSessionOptions,
  PriceTable,
  ProcessToolBackend,
  ProcessToolsOptions,
  RunOptions,
  ScriptedModel,
  ScriptedModelOptions,
  ScriptedStep,
  ShellToolOptions,
  Tool,
  ToolCallContext,
  ToolCallOutcome,
  ToolCallRecord,
  ToolExecuteContext,
  ToolSpec,
  TracingInterceptorOptions,
  Usage,
  ZodToolDefinition,
} from './agent/index.js'

// Routing contracts
export { formatExecResult } from './routing/tool-result.js'
export type { RouteContext, RouteExecutor, RouteRequest } from './routing/types.js'
