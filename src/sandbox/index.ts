/*
 * The provider SPI: what a provider author needs, published as `sandbox-router/provider`, and the
 * only module `providers/*` import from the service (eslint.config.js holds them to it). The groups:
 *
 * - the contract (types.ts) and the errors it speaks (AppError, ErrorCode);
 * - the label schema (labels.ts) and profiles (profiles.ts);
 * - `defineProvider` with the edge rules every provider shares (define-provider.ts), the shared
 *   request checks (exec-request.ts) and the output cap (output-cap.ts);
 * - helpers for a handle: a semaphore for the concurrency bound, secret scrubbing of error messages;
 * - the optional capabilities' kit: a persistent shell over a provider's transport (shell-runner.ts,
 *   shell-script.ts), background processes through the sandbox agent (agent-processes.ts), a port
 *   preview over a provider's URL (preview-connection.ts), the code kernel's language probe;
 * - egress: a profile's policy, its mapping onto a remote provider's network fields (egress/remote.ts)
 *   and the TLS-intercept CA a sandbox behind the egress proxy trusts (egress/tls-ca.ts).
 *
 * Nothing the service uses internally (the registry, the pool, the proxy itself) is exported here.
 * The conformance suite imports vitest, so it has an entry of its own: `sandbox-router/conformance`.
 * See README.md in this folder.
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
  SandboxStats,
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
export { PersistentShellRunner } from './shell-runner.js'
export type { RemoteShell, ShellSink, ShellTransport } from './shell-runner.js'
export { shellInitScript, shellKillScript } from './shell-script.js'
export { AgentProcesses, uploadedAgentProcesses } from './agent-processes.js'
export { connectPreview, jsonObject } from './preview-connection.js'
export type { PreviewTarget } from './preview-connection.js'
export { probeLanguages } from './code/sandbox-code.js'
export { EgressPolicySchema, secretPlaceholder } from '../egress/policy.js'
export type { EgressPolicy } from '../egress/policy.js'
export type { EgressProxy } from '../egress/proxy.js'
export { EgressUnenforceableError, daytonaNetwork, e2bNetwork } from '../egress/remote.js'
export type { DaytonaNetworkFields, E2BNetworkFields, ProfileNetwork } from '../egress/remote.js'
export { SANDBOX_CA_BUNDLE_FILE, SANDBOX_CA_FILE, caBundle, createCa } from '../egress/tls-ca.js'
export type { CaPair } from '../egress/tls-ca.js'
