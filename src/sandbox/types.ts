import type { Duplex } from 'node:stream'
import type { CodeCellPart, CodeLanguage, CodeResult, RunCodeRequest } from './code/types.js'
import type { ResolvedProfile } from './profiles.js'

import type { Labels } from './labels.js'

// The label schema lives in labels.ts; LABELS and Labels are re-exported for the modules that import
// them from here.
export { LABELS } from './labels.js'
export type { Labels } from './labels.js'

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
  sandboxReplaced?: {
    at: number
    reason: string
    filesLost: true
    previousSandboxId: string
    /** The profile's persistent `/workspace` was kept. */
    workspaceKept?: true
  }
  /** Set by the worker (not by providers) for a routed code cell: its value, error and kernel state. */
  code?: CodeCellPart
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
  /**
   * A shell command line the terminal runs (as `bash -c <command>`; `exec` it to keep the shell's pid)
   * instead of an interactive bash. @default an interactive bash
   */
  command?: string
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

/**
 * How a request through a {@link PortStream} must be addressed when the stream reaches a remote
 * provider's preview proxy (Daytona, E2B) rather than the port itself: the proxy routes on `host`
 * (and `basePath`) and checks the provider's token header. These values stay inside the service.
 */
export interface PortPreview {
  /** `Host` header to send (e.g. `8000-<sandboxId>.e2b.app`). */
  readonly host: string
  /** Path the preview URL starts with, prefixed to the request's path ('' for a bare origin). */
  readonly basePath: string
  /** Headers the proxy needs (the provider's access token); never passed back to the caller. */
  readonly headers: Readonly<Record<string, string>>
  /**
   * Whether an answer of the proxy means "nothing listens on that port" (the proxy's own 502, told
   * apart from a 502 of the server in the sandbox by its body). Called only for a 502 status.
   */
  unreachable(body: string): boolean
}

/** A byte stream to a port in a sandbox; `preview` set when it goes through a provider's preview proxy. */
export type PortStream = Duplex & { readonly preview?: PortPreview }

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
   * the connection. Rejects with `PORT_UNREACHABLE` when nothing listens there. Remote providers
   * answer with a connection to their preview proxy instead, described by `preview` (whose 502
   * answer then says the port is closed).
   */
  openPort?(port: number, opts?: { signal?: AbortSignal }): Promise<PortStream>
  /** Starts an interactive terminal (bash on a pty). */
  openTerminal?(opts: TerminalOptions): Promise<SandboxTerminal>
  /**
   * Capability: background processes that outlive the call (see {@link SandboxProcesses}). Absent
   * where the provider has none; callers then answer `UNSUPPORTED`.
   */
  readonly processes?: SandboxProcesses
  /**
   * Capability: the provider's own stateful code interpreter (E2B's, Daytona's code run). Absent,
   * the service runs its kernel as a background process ({@link processes}); see src/sandbox/code.
   */
  readonly code?: SandboxCode
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
  /**
   * Capability: freezes every process of the sandbox in place, memory and files kept, until
   * {@link resume} (Docker: the engine's pause, the cgroup freezer); E2B's pause. Pausing a paused
   * sandbox is not an error; a gone one is `NOT_FOUND`. Absent: the provider cannot pause.
   */
  pause?(ref: SandboxRef): Promise<void>
  /** Thaws a sandbox {@link pause} froze; resuming a running one is not an error. */
  resume?(ref: SandboxRef): Promise<void>
  /**
   * Capability: the sandbox's CPU and memory use now, as its backend measures them (Docker: the
   * engine's stats of the container; E2B: its latest metric). Undefined while the backend has no
   * figure yet. `NOT_FOUND` when it is gone. Absent: no figures.
   */
  stats?(ref: SandboxRef, opts?: { signal?: AbortSignal }): Promise<SandboxStats | undefined>
  /**
   * Container runtimes (kernel boundaries) the backend offers, for profiles' `runtime` (Docker:
   * the engine's registered runtimes, e.g. `runc`, `runsc`). A provider without it takes only
   * profiles with the default `runtime: 'runc'`.
   */
  runtimes?(): Promise<string[]>
  /** Releases clients and channels held by the provider. */
  close?(): Promise<void>
  /**
   * Capability: profiles with `workspace.persistent` (a session's /workspace outlives its sandbox).
   * Absent: such profiles are refused and sessions have no workspace to drop.
   */
  readonly workspaces?: ProviderWorkspaces
  /** Capability: snapshots of a sandbox and sessions started from one. Absent: `UNSUPPORTED`. */
  readonly snapshots?: ProviderSnapshots
}

/** A sandbox's resource use at one moment ({@link SandboxProvider.stats}). */
export interface SandboxStats {
  /** CPU used over the backend's last sampling interval, in % of {@link cpuCount} CPUs' worth (0–100). */
  cpuUsedPct: number
  /** CPUs the sandbox may use (its limit, else the host's). */
  cpuCount: number
  /** Memory in use, page cache that can be reclaimed left out (bytes). */
  memUsedBytes: number
  /** The sandbox's memory limit (bytes). */
  memTotalBytes: number
  /** Page cache charged to the sandbox (bytes). */
  memCacheBytes: number
}

/** Persistent workspaces of sessions ({@link SandboxProvider.workspaces}). */
export interface ProviderWorkspaces {
  /** Deletes a session's persistent workspace (`labels` as its sandboxes get them); absent is fine. */
  drop(labels: Labels): Promise<void>
  /**
   * Deletes every workspace and snapshot carrying all of `labels` (the embedded mode's shutdown:
   * its session and snapshot records die with the process).
   */
  dropAll(labels: Labels): Promise<void>
}

/** What a snapshot holds, as its provider measured it. */
export interface SnapshotCapture {
  /** Bytes of the captured workspace. */
  workspaceBytes: number
  /**
   * `tmpfs`: it holds the files of the sandbox's in-memory mounts, not a persistent workspace;
   * `sandbox`: it is the whole sandbox (a provider with {@link ProviderSnapshots.wholeSandbox}).
   */
  layout?: 'tmpfs' | 'sandbox'
}

/** Snapshots of sandboxes ({@link SandboxProvider.snapshots}). */
export interface ProviderSnapshots {
  /**
   * Its snapshots are whole sandboxes (E2B's): any profile's sandbox can be captured (no persistent
   * workspace needed, `tmpfs` does not apply), and `restore` starts the session's sandbox itself.
   */
  readonly wholeSandbox?: boolean
  /**
   * Captures a running sandbox under `snapshotId`: its filesystem changes and its persistent
   * workspace. `BAD_REQUEST` when the sandbox has no persistent workspace, unless `tmpfs` asks for
   * the files of its in-memory mounts instead (the result's `layout` then says so); `NO_SPACE` when
   * the workspace is over `maxWorkspaceBytes`.
   */
  capture(
    ref: SandboxRef,
    snapshotId: string,
    opts: { labels: Labels; maxWorkspaceBytes?: number; tmpfs?: boolean },
  ): Promise<SnapshotCapture>
  /**
   * Prepares a session that has no sandbox yet (`labels` as its sandboxes get them) so that its
   * sandboxes start from the snapshot: its filesystem changes, and its workspace as the session's
   * (a `tmpfs` snapshot: its files copied into each sandbox's in-memory mounts at start).
   * `CONFLICT` when the session already has a workspace. `profile` is the session's (a
   * {@link wholeSandbox} provider starts the session's sandbox from the snapshot with it).
   */
  restore(snapshotId: string, labels: Labels, profile?: ResolvedProfile): Promise<void>
  /** Deletes what the snapshot holds; a missing snapshot is fine. */
  remove(snapshotId: string): Promise<void>
}

/** What {@link SandboxProcesses.start} runs. */
export interface ProcessStartRequest {
  /** A shell command line, run by `bash -c` (or `sh -c`) as the leader of its own process group. */
  command: string
  /** Working directory; defaults to the profile's `cwd`. */
  cwd?: string
  /** Extra environment variables (merged over the profile's env). */
  env?: Record<string, string>
  /**
   * Bytes of stdout and of stderr kept per process; past it the oldest bytes are dropped (unless
   * {@link backpressure}).
   */
  outputBufferBytes: number
  /** Refuse (`QUOTA_EXCEEDED`) when this many of the sandbox's processes run already. */
  maxRunning: number
  /**
   * Slow the writer instead of dropping output: a stream's buffer never overwrites bytes no read has
   * acknowledged (a read acknowledges everything below the offset it asks for), so a process that
   * writes faster than it is read blocks on its full pipe until a read makes room. Only the reader
   * furthest ahead holds it back: a reader behind another's acknowledgement can still see `dropped`.
   * Only while someone reads: once no read came for {@link backpressureIdleMs} (the reader went
   * away), the buffer drops the oldest bytes again until a read comes (as envd holds a writer back
   * for its connected streams only); before that, a held-back process still ends by a signal or
   * `remove`. A sandbox whose agent predates backpressure (one that outlived an upgrade of the
   * service) starts the process without it: its readers see `dropped` if the buffer overflows.
   * @default false (the buffer drops the oldest bytes)
   */
  backpressure?: boolean
  /**
   * With {@link backpressure}: how long without any read of the process before its writer is no
   * longer held back. @default 15 000 (three of the E2B stream's 5-s long polls)
   */
  backpressureIdleMs?: number
}

/** One background process of a sandbox, as every surface shows it. */
export interface ProcessInfo {
  /** Service-assigned id (`p-…`), unique within the sandbox. */
  id: string
  command: string
  /** Pid inside the sandbox of the process group's leader. */
  pid: number
  /** `lost`: it ended without an exit status (its supervisor was killed from inside the sandbox). */
  state: 'running' | 'exited' | 'lost'
  /** Exit code once exited normally; `null` while running or when ended by a signal. */
  exitCode: number | null
  /** Signal name (e.g. `SIGTERM`) when a signal ended it. */
  signal: string | null
  /** Epoch ms. */
  startedAt: number
  /** Epoch ms of the exit; `null` while running. */
  endedAt: number | null
  /** Whether its stdin was closed (over the API). */
  stdinClosed: boolean
  /**
   * Bytes it wrote to each stream since it started (dropped ones included). Once it exited, this
   * includes the bytes its pipe still held at the exit, which reads return next: read until the
   * offsets reach these counts to have all of its output.
   */
  stdoutBytes: number
  stderrBytes: number
}

/** A slice of one output stream. Offsets count every byte the stream ever carried. */
export interface OutputSlice {
  /** The bytes from `offset` to `nextOffset`, decoded as UTF-8. */
  data: string
  /** Offset of the first byte returned. */
  offset: number
  /** Where the next read should start. */
  nextOffset: number
  /** Bytes between the offset asked for and `offset` that the capped buffer no longer holds. */
  dropped: number
}

/** {@link SandboxProcesses.read}: the process and one slice of each stream. */
export interface ProcessOutput {
  process: ProcessInfo
  stdout: OutputSlice
  stderr: OutputSlice
}

/**
 * Background processes of one sandbox. Their state belongs to the sandbox, not to a handle: any
 * handle of the fleet serves any of them, and they die with the sandbox. Unknown ids are
 * `NOT_FOUND`; a process past its end (signal, stdin) is `CONFLICT`.
 */
export interface SandboxProcesses {
  /** Starts `command`; resolves once it runs. */
  start(id: string, request: ProcessStartRequest, opts?: { signal?: AbortSignal }): Promise<ProcessInfo>
  list(opts?: { signal?: AbortSignal }): Promise<ProcessInfo[]>
  /**
   * Up to `maxBytes` of each stream from the given offsets (clamped to what the buffer holds). With
   * `waitMs`, first waits up to that long (at most 20 s) for a byte past an offset or the end.
   */
  read(
    id: string,
    from: { stdoutOffset: number; stderrOffset: number; maxBytes: number; waitMs?: number },
    opts?: { signal?: AbortSignal },
  ): Promise<ProcessOutput>
  /** Writes `data` to its stdin; with `close`, closes stdin afterwards (the process sees EOF). */
  writeStdin(
    id: string,
    data: Uint8Array,
    close: boolean,
    opts?: { signal?: AbortSignal },
  ): Promise<{ written: number; process: ProcessInfo }>
  /** Sends `signal` (a name such as `SIGTERM`) to its whole process group; waits up to `waitMs` for its end. */
  signal(id: string, signal: string, waitMs: number, opts?: { signal?: AbortSignal }): Promise<ProcessInfo>
  /** Kills its group if it runs and forgets it (its output is gone). */
  remove(id: string, opts?: { signal?: AbortSignal }): Promise<ProcessInfo>
}

/** A sandbox's code interpreter: a kernel per language whose state persists between cells. */
export interface SandboxCode {
  /** The languages this sandbox runs (e.g. none in an image without python3 or node). */
  languages(opts?: { signal?: AbortSignal }): Promise<CodeLanguage[]>
  /** Runs one cell; an exception in the cell is the result's `error`, not a rejection. */
  run(request: RunCodeRequest, opts?: { signal?: AbortSignal }): Promise<CodeResult>
}
