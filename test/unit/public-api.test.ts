import { describe, expect, test } from 'vitest'
import * as pkg from '../../src/index.js'

/**
 * The values of the package root (`sandbox-router`), pinned: adding or removing one is a decision about
 * the public API (DESIGN.md §3, docs/), made here on purpose. Helpers the service uses internally stay
 * in their modules, and tests import them from there.
 */
const PUBLIC_VALUES = [
  // errors
  'AppError',
  // decision core (DESIGN.md §3) and the built-in interceptors
  'InterceptorError',
  'ModelRequestDecision',
  'PromptDecision',
  'ToolCallDecision',
  'ToolResultDecision',
  'evaluateModelRequest',
  'evaluatePrompt',
  'evaluateToolCall',
  'evaluateToolResult',
  'forceWorkingDirectory',
  'piiRedactor',
  'routeCodeTools',
  'routeShellTools',
  'secretScanner',
  'tenantScope',
  // extensions and lifecycle
  'ExtensionCapability',
  'ExtensionError',
  'ExtensionRegistry',
  'composeInterceptors',
  'defineExtension',
  'matchesToolName',
  'LifecycleDispatcher',
  'LifecycleEventType',
  // model clients
  'anthropic',
  'openAICompatible',
  // egress policy language and proxy (docs/egress.md)
  'EgressPolicySchema',
  'EgressProxy',
  'EgressRuleError',
  'compileEgress',
  'decideEgress',
  'parseEgressRule',
  // sandboxes and the session pool
  'ProviderRegistry',
  'Semaphore',
  'resolveProfile',
  'MemorySessionStore',
  'RedisSessionStore',
  'createSessionPool',
  // the agent loop
  'AgentConfigError',
  'AgentSessionError',
  'BudgetInterceptor',
  'ForcedStop',
  'LoggingInterceptor',
  'LoopDecision',
  'ModelCallError',
  'TracingInterceptor',
  'createAgent',
  'defineTool',
  'finishNow',
  'processTools',
  'scriptedModel',
  'scriptedToolCall',
  'shellTool',
  // routing contracts
  'formatExecResult',
]

describe('the package root', () => {
  test('exports exactly the public values', () => {
    expect(Object.keys(pkg).sort()).toEqual([...PUBLIC_VALUES].sort())
  })

  test('exports none of the internals the review named', () => {
    for (const internal of [
      'luhnValid',
      'redactPii',
      'shellQuote',
      'normalizeUsage',
      'finishReasonLabel',
      'compileTool',
      'AGENT_SPANS',
      'DEFAULT_BUDGET_INSTRUCTION',
      'staticRouteTargets',
      'createApp',
      'QueueRouteExecutor',
      'executeRoutedToolCall',
    ]) {
      expect(pkg, internal).not.toHaveProperty(internal)
    }
  })
})
