import type { Duplex } from 'node:stream'
import type { ResolvedProfile } from './profiles.js'

/** Labels carried by every sandbox (Docker labels, Daytona labels, E2B metadata). */
export type Labels = Record<string, string>

/** Label keys the service sets on every sandbox it creates. */
export const LABELS = {
  /** Always `sandbox-router`: marks sandboxes this service owns (the reaper's filter). */
  owner: 'sandbox-router.owner',
  tenant: 'sandbox-router.tenant',
  /** Hash of the session key, or `ephemeral` / `warm` for pooled sandboxes not yet bound. */
  session: 'sandbox-router.session',
  profile: 'sandbox-router.profile',
  /** Instance id of the process that created it (diagnostics only). */
  instance: 'sandbox-router.instance',
} as const

/** How any worker of the fleet finds a sandbox again. Serialisable (stored in Redis). */
export interface SandboxRef {
  providerId: string
  /** Provider-native id (Docker container id, Daytona sandbox id, E2B sandbox id). */
  id: string
  /** Profile the sandbox was created with. */
  profile: string
  labels?: Labels
}

/**
 * Where a command runs: `fresh`, a new `bash -c` per command (nothing carries over), or
 * `persistent`, the sandbox's long-lived shell, which keeps the working directory, exported
 * variables, functions and aliases between calls.
 */
export type ShellMode = 'persistent' | 'fresh'

/** One command to run inside a sandbox. */
export interface ExecRequest {
  /** A shell command line, run by `bash -c` (or `sh -c` where bash is absent). */
  command: string
  /** Working directory; defaults to the profile's `cwd`. */
  cwd?: string
  /** Extra environment variables (merged over the profile's env). */
  env?: Record<string, string>
  /** Bytes written to the command's stdin, then stdin is closed. */
  stdin?: string | Uint8Array
  /** Hard deadline in ms: the whole process group is killed inside the sandbox; output so far is kept. */
  timeoutMs: number
  /** Per-stream output cap in bytes; past it output is dropped, `truncated` is set, the process keeps running unblocked. */
  outputCapBytes: number
  /**
   * `persistent` runs the command in the sandbox's persistent shell (only where
   * {@link Sandbox.persistentShell} is true; elsewhere `BAD_REQUEST`). There, `cwd` is a `cd` that
   * stays, and `env` is exported into the shell and stays; a timeout or cancel kills what the
   * command started and keeps the shell. @default 'fresh'
   */
  shell?: ShellMode
}

/** Live output callbacks and cancellation for {@link Sandbox.exec}. */
export interface ExecOptions {
  /** Aborting kills the process group inside the sandbox; the promise then rejects with the abort reason. */
  signal?: AbortSignal
  onStdout?: (chunk: string) => void
  onStderr?: (chunk: string) => void
}

/** The normalised result of a command, the same for every provider. */
export interface ExecResult {
  /** Exit code; `null` when the process was ended by a signal. */
  exitCode: number | null
  /** Signal name (e.g. `SIGKILL`) when the process was ended by a signal. */
  signal?: string
  stdout: string
  stderr: string
  timedOut: boolean
  truncated: boolean
  durationMs: number
  sandboxId: string
  /**
   * `persistent` shell calls only: true when the command ran in a shell that does not hold the
   * state of the sandbox's previous persistent call (that shell died — `exit`, `exec`, OOM, a kill
   * after a timeout — or was another connection's): cwd, variables and functions from before are gone.
   */
  shellRestarted?: boolean
  /**
   * Set by the session pool (not by providers) while the session's sandbox was replaced by an
   * empty one and the user has not acknowledged it: files from before are lost.
   */
  sandboxReplaced?: { at: number; reason: string; filesLost: true; previousSandboxId: string }
  /**
   * Set by the worker (not by providers) when the call was routed by a routing policy: the
   * candidate that ran it, whether the session was pinned there, and why earlier candidates did not.
   */
  route?: {
    policy: string
    providerId: string
    profile: string
    pinned: boolean
    skipped: { providerId: string; profile: string; reason: string }[]
  }
}

/** Health of one sandbox. */
export interface SandboxHealth {
  ok: boolean
  /** Why it is not ok (e.g. `container exited (137)`). */
  reason?: string
}

/** Options of {@link Sandbox.openTerminal}. */
export interface TerminalOptions {
  /** Window size in character cells (1–65535). */
  cols: number
  rows: number
  /** Where the shell starts; defaults to the profile's `cwd`. */
  cwd?: string
  /** Extra environment variables (`TERM` defaults to `xterm-256color`). */
  env?: Record<string, string>
  signal?: AbortSignal
}

/** How a terminal's process ended: its exit code, or the signal that ended it; both absent when it was closed. */
export interface TerminalExit {
  exitCode: number | null
  signal?: string
}

/** An interactive terminal inside a sandbox: bash on a pty. */
export interface SandboxTerminal {
  /** Terminal output to read, keyboard input to write (raw bytes). Destroying it closes the terminal. */
  readonly stream: Duplex
  /** Process id of the terminal's shell inside the sandbox. */
  readonly pid: number
  /** Sets the window size (the foreground job gets SIGWINCH). */
  resize(cols: number, rows: number): void
  /** Resolves once the shell ended (by itself, or killed by {@link close}). Never rejects. */
  readonly exited: Promise<TerminalExit>
  /** Kills the terminal's processes (its whole session). Idempotent. */
  close(): void
}

/** A live handle to one sandbox. */
export interface Sandbox {
  readonly ref: SandboxRef
  /** Capability flag: whether `exec` takes `shell: 'persistent'`. @default false */
  readonly persistentShell?: boolean
  /**
   * Capability flag: whether {@link openPort} reaches ports inside the sandbox (over the provider's
   * own channel, so it works with `network: none`). @default false
   */
  readonly ports?: boolean
  /** Capability flag: whether {@link openTerminal} gives an interactive terminal. @default false */
  readonly terminals?: boolean
  /**
   * A TCP connection to `127.0.0.1:port` inside the sandbox, as a byte stream; destroying it closes
   * the connection. Rejects with `PORT_UNREACHABLE` when nothing listens there.
   */
  openPort?(port: number, opts?: { signal?: AbortSignal }): Promise<Duplex>
  /** Starts an interactive terminal (bash on a pty). */
  openTerminal?(opts: TerminalOptions): Promise<SandboxTerminal>
  exec(request: ExecRequest, opts?: ExecOptions): Promise<ExecResult>
  /** Writes a file (binary-safe), creating parent directories. Relative paths resolve against the profile cwd. */
  writeFile(path: string, data: string | Uint8Array, opts?: { signal?: AbortSignal }): Promise<void>
  /** Reads a file (binary-safe). Throws `AppError('NOT_FOUND')` when absent. */
  readFile(path: string, opts?: { signal?: AbortSignal }): Promise<Uint8Array>
  health(): Promise<SandboxHealth>
  /**
   * Cheap check before a call: resolves when the handle can run commands (reopening a dropped
   * channel if the sandbox still runs), throws `SANDBOX_LOST` when the sandbox is gone. Optional:
   * without it, a dead sandbox shows up as the call's own `SANDBOX_LOST`.
   */
  ready?(opts?: { signal?: AbortSignal }): Promise<void>
  /** Releases this handle's channel without destroying the sandbox. Idempotent. */
  close(): Promise<void>
}

/** Options of {@link SandboxProvider.create}. */
export interface CreateOptions {
  labels: Labels
  signal?: AbortSignal
}

/**
 * The provider SPI. Implementations live in `providers/*` and depend only on this folder.
 * Errors are `AppError`s mapped at the provider edge: `SANDBOX_LOST` when a sandbox vanished,
 * `SANDBOX_CREATE_FAILED` (retryable when transient), `CONFIG_INVALID` for bad credentials.
 */
export interface SandboxProvider {
  readonly id: string
  /**
   * Capability flag: whether this provider's sandboxes take `shell: 'persistent'` (each handle's
   * {@link Sandbox.persistentShell}), for surfaces that describe the shell before a sandbox exists
   * (the MCP server instructions). @default false
   */
  readonly persistentShells?: boolean
  create(profile: ResolvedProfile, opts: CreateOptions): Promise<Sandbox>
  connect(ref: SandboxRef, opts?: { signal?: AbortSignal }): Promise<Sandbox>
  /** Sandboxes whose labels include every given label. */
  list(filter: { labels: Labels }): Promise<SandboxRef[]>
  /** Destroys the sandbox; destroying one that is already gone is not an error. */
  destroy(ref: SandboxRef): Promise<void>
  /** Whether the provider's backend answers (engine ping, API reachability). */
  health?(): Promise<SandboxHealth>
  /** Releases clients and channels held by the provider. */
  close?(): Promise<void>
}
