import { readFileSync } from 'node:fs'
import { describe, expect, test } from 'vitest'
import * as pkg from '../../src/index.js'
import * as spi from '../../src/sandbox/index.js'

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
      'ProfileCatalog',
      'createApp',
      'QueueRouteExecutor',
      'executeRoutedToolCall',
    ]) {
      expect(pkg, internal).not.toHaveProperty(internal)
    }
  })
})

/**
 * The values of `sandbox-router/provider` (src/sandbox/index.ts), pinned the same way: what a provider
 * author writes against (src/sandbox/README.md), and nothing the service uses internally. The built-in
 * providers import nothing else of the service (eslint.config.js), so this is their kit too.
 */
const PROVIDER_SPI_VALUES = [
  'AppError',
  // the label schema
  'CONFORMANCE_RUN_LABEL',
  'DEFAULT_MAX_EXECS',
  'LABELS',
  'OWNER',
  'POOL_LABELS',
  'PROVIDER_LABELS',
  'SETTINGS_LABELS',
  'VOLUME_LABELS',
  'isOwned',
  'matchesLabels',
  'ownedLabels',
  'ownerFilter',
  'positiveIntLabel',
  'settingsOf',
  // profiles
  'ProfileSchema',
  'SANDBOX_RUNTIMES',
  'resolveProfile',
  // request checks and the output cap
  'resolveExecRequest',
  'resolveSandboxPath',
  'HeadTailSink',
  'droppedMarker',
  'joinHeadTail',
  'outputSplit',
  // defineProvider and its edge rules
  'assertProfileFor',
  'assertRefFor',
  'createFailed',
  'defineProvider',
  'raceAbort',
  // helpers
  'Semaphore',
  'scrubSecret',
  'secretSafeCause',
  'CODE_LANGUAGES',
  // the optional capabilities' kit: persistent shell, agent processes, port preview, code probe
  'PersistentShellRunner',
  'shellInitScript',
  'shellKillScript',
  'AgentProcesses',
  'uploadedAgentProcesses',
  'connectPreview',
  'jsonObject',
  'probeLanguages',
  // egress: the policy, its mapping onto remote providers, the TLS-intercept CA
  'EgressPolicySchema',
  'secretPlaceholder',
  'EgressUnenforceableError',
  'daytonaNetwork',
  'e2bNetwork',
  'SANDBOX_CA_BUNDLE_FILE',
  'SANDBOX_CA_FILE',
  'caBundle',
  'createCa',
]

describe('the provider SPI entry (sandbox-router/provider)', () => {
  test('exports exactly the SPI values', () => {
    expect(Object.keys(spi).sort()).toEqual([...PROVIDER_SPI_VALUES].sort())
  })

  test('exports none of the service internals', () => {
    for (const internal of [
      'ProviderRegistry',
      'runProviderConformance',
      'EgressProxy',
      'createLeaf',
      'compileEgress',
      'staticRouteTargets',
      'ProfileCatalog',
      'createSessionPool',
      'poolLabels',
      'scopeLabels',
    ]) {
      expect(spi, internal).not.toHaveProperty(internal)
    }
  })

  test('package.json publishes it at sandbox-router/provider', () => {
    const manifest = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as {
      exports: Record<string, { types: string; import: string }>
    }
    expect(manifest.exports['./provider']).toEqual({
      types: './dist/src/sandbox/index.d.ts',
      import: './dist/src/sandbox/index.js',
    })
  })
})

describe('the conformance entry (sandbox-router/conformance)', () => {
  test('package.json publishes src/sandbox/conformance/index.ts, vitest an optional peer', () => {
    const manifest = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as {
      exports: Record<string, { types: string; import: string }>
      peerDependencies?: Record<string, string>
      peerDependenciesMeta?: Record<string, { optional?: boolean }>
    }
    expect(manifest.exports['./conformance']).toEqual({
      types: './dist/src/sandbox/conformance/index.d.ts',
      import: './dist/src/sandbox/conformance/index.js',
    })
    expect(manifest.peerDependencies).toHaveProperty('vitest')
    expect(manifest.peerDependenciesMeta?.['vitest']?.optional).toBe(true)
  })
})
