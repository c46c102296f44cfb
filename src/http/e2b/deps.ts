import type { Logger } from '../../logger.js'
import type { Keyring } from '../keyring.js'
import type { CodeService, ProcessService, SessionService } from '../deps.js'
import type { SnapshotService } from '../../services/index.js'
import type { SessionStreamService } from '../../services/session-streams.js'
import type { E2BState } from '../../services/e2b/state.js'
import type { SandboxStats } from '../../services/e2b/metrics.js'

/** The server's tool-call policy applied to one E2B command: run it (maybe rewritten) or refuse it. */
import type { E2BCommandVerdict } from '../../services/e2b/policy.js'
import type { ProfileNetwork } from './network-request.js'
export type { E2BCommandVerdict }

/** What the E2B-compatible endpoint needs beyond the services every route uses. */
export interface E2BEndpointDeps {
  /** E2B template → our profile (config `e2b.templates`). */
  templates: Readonly<Record<string, string>>
  /** The provider of a profile; throws UNKNOWN_PROFILE naming the known ones. */
  providerOf(profile: string): string
  /** The working directory of a profile's sandboxes: relative file paths resolve against it. */
  cwdOf?(profile: string): string
  /** A profile's network, against which a create's network rules are checked. @default 'none' */
  networkOf?(profile: string): ProfileNetwork
  /**
   * The network-less variant of a profile (registered beside it for the E2B templates), where a
   * create that turns the network off runs. Absent: such a create is refused with a 400.
   */
  noNetworkProfileOf?(profile: string): string | undefined
  /** Where E2B sandbox records live (Redis in a fleet). @default one in this process's memory */
  state?: E2BState
  /**
   * The sandbox domain create and connect report (config `e2b.domain`): `getHost(port)` is
   * `<port>-<sandboxId>.<domain>`. @default `localhost:<the port the request came to>`
   */
  domain?: string
  /** Whether the provider can pause and resume sandboxes (and this process holds them). */
  canPause?(provider: string): boolean
  /**
   * Freezes (`paused`) or thaws the sandbox of the tenant's session (E2B's pause / resume) and
   * returns its id (undefined: the session has no sandbox yet, nothing to freeze). A thaw naming
   * `sandbox` (the id the pause returned) is NOT_FOUND when the session no longer has that sandbox
   * (evicted while paused). Only called when {@link canPause} said yes.
   */
  setPaused?(
    tenant: string,
    sessionId: string,
    paused: boolean,
    sandbox?: string,
  ): Promise<string | undefined>
  /**
   * The CPU and memory use of the sandbox behind the tenant's session now (E2B's metrics);
   * undefined while it holds no sandbox. Absent: metrics are a 501.
   */
  sandboxStats?(tenant: string, sessionId: string): Promise<SandboxStats | undefined>
  /** Runs `command` through the server's tool-call interceptors as a `bash` call. */
  policy(tenant: string, sandboxId: string, command: string): Promise<E2BCommandVerdict>
}

/** Everything the E2B routes use. */
export interface E2BRouteDeps {
  e2b: E2BEndpointDeps
  keyring: Keyring
  logger: Logger
  sessions: SessionService
  processes?: ProcessService
  /** Port forwarding (`getHost(port)` host names); absent (`sbx api`): such a request is a 501. */
  streams?: SessionStreamService
  /** Snapshots and forks (`createSnapshot`, `fork`, create from a snapshot); absent: 501. */
  snapshots?: SnapshotService
  /** The code interpreter behind `/execute` (`@e2b/code-interpreter`'s runCode); absent: 501. */
  code?: CodeService
  /** Counts one request of the tenant against the limiter of the rest of the API (RATE_LIMITED past it). */
  admitRequest(tenant: string): Promise<void>
  fileLimitBytes: number
}
