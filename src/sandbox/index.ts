/*
 * The provider SPI: what a provider author needs, published as `sandbox-router/provider`. The
 * contract (types.ts), the errors it speaks (AppError), the label schema (labels.ts), the shared
 * request checks (exec-request.ts), the output cap (output-cap.ts), `defineProvider` with the edge
 * rules every provider shares (define-provider.ts), a semaphore for the concurrency bound, and the
 * secret scrubbing of error messages. Nothing the service uses internally (the registry, the pool,
 * the shell runner) is exported here. The conformance suite imports vitest, so it has an entry of
 * its own: `sandbox-router/conformance`. See README.md in this folder.
 */
export { AppError } from '../errors.js'
export type { ErrorCode } from '../errors.js'
export type {
  CreateOptions,
  ExecOptions,
  ExecRequest,
  ExecResult,
  OutputSlice,
  PortPreview,
  PortStream,
  ProcessInfo,
  ProcessOutput,
  ProcessStartRequest,
  ProviderSnapshots,
  ProviderWorkspaces,
  Sandbox,
  SandboxCode,
  SandboxHealth,
  SandboxProcesses,
  SandboxProvider,
  SandboxRef,
  SandboxTerminal,
  ShellMode,
  SnapshotCapture,
  TerminalExit,
  TerminalOptions,
} from './types.js'
export {
  CONFORMANCE_RUN_LABEL,
  DEFAULT_MAX_EXECS,
  LABELS,
  OWNER,
  POOL_LABELS,
  PROVIDER_LABELS,
  SETTINGS_LABELS,
  VOLUME_LABELS,
  isOwned,
  matchesLabels,
  ownedLabels,
  ownerFilter,
  positiveIntLabel,
  settingsOf,
} from './labels.js'
export type { LabelSettings, Labels } from './labels.js'
export { ProfileSchema, resolveProfile, SANDBOX_RUNTIMES } from './profiles.js'
export type { ProfileInput, ResolvedProfile, SandboxRuntime } from './profiles.js'
export { resolveExecRequest, resolveSandboxPath } from './exec-request.js'
export type { ExecRequestRules, ResolvedExec } from './exec-request.js'
export { HeadTailSink, droppedMarker, joinHeadTail, outputSplit } from './output-cap.js'
export { assertProfileFor, assertRefFor, createFailed, defineProvider, raceAbort } from './define-provider.js'
export type {
  BackendSandbox,
  DefinedProvider,
  FailedCreate,
  FoundSandbox,
  ListedSandbox,
  ProviderBackend,
  ProviderDefinition,
} from './define-provider.js'
export type { ProfileResolver, ProviderResolver, ResolvedRoute } from './resolver.js'
export { Semaphore } from './semaphore.js'
export { scrubSecret, secretSafeCause } from './secret-scrub.js'
export { CODE_LANGUAGES } from './code/types.js'
export type {
  CodeCellPart,
  CodeError,
  CodeLanguage,
  CodeOutput,
  CodeResult,
  RunCodeRequest,
} from './code/types.js'
