// The sandbox folder's public API. The provider conformance suite imports vitest, so it is not
// exported here: import `runProviderConformance` from `src/sandbox/conformance.js` directly
// (its cases live in `conformance.ts` and `conformance-io.ts`).
export {
  CONFORMANCE_RUN_LABEL,
  LABELS,
  OWNER,
  POOL_LABELS,
  PROVIDER_LABELS,
  SETTINGS_LABELS,
  VOLUME_LABELS,
  ownedLabels,
} from './labels.js'
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
  Sandbox,
  SandboxCode,
  SandboxHealth,
  SandboxProcesses,
  SandboxProvider,
  ProviderSnapshots,
  ProviderWorkspaces,
  SnapshotCapture,
  SandboxRef,
} from './types.js'
export { ProfileSchema, resolveProfile, SANDBOX_RUNTIMES } from './profiles.js'
export type { ProfileInput, ResolvedProfile, SandboxRuntime } from './profiles.js'
export { ProviderRegistry } from './registry.js'
export type { ResolvedRoute } from './registry.js'
export { Semaphore } from './semaphore.js'
export { resolveExecRequest, resolveSandboxPath } from './exec-request.js'
export type { ExecRequestRules, ResolvedExec } from './exec-request.js'
export { assertProfileFor, assertRefFor, raceAbort } from './provider-kit.js'
export { codeOf, CODE_LANGUAGES, kernelCode, requireCode, runKernelCode } from './code/index.js'
export type { CodeError, CodeLanguage, CodeOutput, CodeResult, RunCodeRequest } from './code/index.js'
