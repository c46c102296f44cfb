// The sandbox folder's public API. The provider conformance suite imports vitest, so it is not
// exported here: import `runProviderConformance` from `src/sandbox/conformance.js` directly
// (its cases live in `conformance.ts` and `conformance-io.ts`).
export { LABELS } from './types.js'
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
export {
  assertProfileFor,
  assertRefFor,
  ownedLabels,
  OWNER,
  raceAbort,
  SETTINGS_LABELS,
} from './provider-kit.js'
export { codeOf, CODE_LANGUAGES, kernelCode, requireCode, runKernelCode } from './code/index.js'
export type { CodeError, CodeLanguage, CodeOutput, CodeResult, RunCodeRequest } from './code/index.js'
