import {
  AppError,
  type ExecOptions,
  type ExecRequest,
  type ExecResult,
  PersistentShellRunner,
  type PortStream,
  raceAbort,
  resolveExecRequest,
  resolveSandboxPath,
  type Sandbox,
  type SandboxHealth,
  type SandboxProcesses,
  type SandboxRef,
  Semaphore,
  uploadedAgentProcesses,
} from '../../src/sandbox/index.js'
import type { Sandbox as RemoteSandbox } from '@daytonaio/sdk'
import { DaytonaError, DaytonaInvalidFilePathError, DaytonaNotFoundError } from '@daytonaio/sdk'
import { type ErrorScope, isFileAccessDenied, mapDaytonaError, mayBeLost } from './errors.js'
import { type ExecContext, startRun } from './exec.js'
import type { ResolvedDaytonaProviderOptions } from './options.js'
import { type DaemonCall, mkdirCall, probeCall } from './wrapper.js'
import { type DaytonaShellSession, daytonaShellTransport } from './shell.js'
import { openDaytonaPort } from './preview.js'

/** Daytona accepts only these names in an exec's environment. */
const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/
/** One env string is an exec argument: Linux caps each at 128 KiB. */
const MAX_COMMAND_BYTES = 120 * 1024

/** What a handle knows about its sandbox (from the profile, or from labels on connect). */
export interface DaytonaSandboxSettings {
  /** Default working directory; relative paths resolve against it. */
  cwd: string
  /** Commands this handle runs at once; more wait for a slot. */
  maxConcurrentExecs: number
}

/** What handles share with their provider. */
export interface HandleContext {
  scope: ErrorScope
  options: ResolvedDaytonaProviderOptions
  /** `SANDBOX_LOST` when the sandbox is gone or not running, else undefined (state unknown or fine). */
  checkLost(sandboxId: string): Promise<AppError | undefined>
  /** Re-reads the state and brings the sandbox back to `started` (see the provider); `SANDBOX_LOST` when gone. */
  revive(remote: RemoteSandbox, what: string, signal?: AbortSignal): Promise<'running' | 'restarted'>
}

/** Margin under the auto-stop interval for the state check of {@link DaytonaSandbox.ready} (ms). */
const STATE_CHECK_MARGIN_MS = 15_000
const MINUTE_MS = 60_000

/**
 * A handle to one Daytona sandbox. Commands go through the toolbox `/process/execute` endpoint
 * under the wrapper of `wrapper.ts`; files through the toolbox upload/download endpoints.
 */
export class DaytonaSandbox implements Sandbox {
  /** Background processes, where `agentBinaryPath` is set (the agent is uploaded on first use). */
  readonly processes?: SandboxProcesses
  /** Commands take `shell: 'persistent'`: one toolbox session per handle (see `shell.ts`). */
  readonly persistentShell = true
  /** Ports are reached through Daytona's preview proxy (`getPreviewLink`), see `preview.ts`. */
  readonly ports = true
  private closed = false
  /** When this handle last had a toolbox call running (ms since the epoch). */
  private lastUsed = Date.now()
  /** Toolbox calls of this handle in progress (while one runs, Daytona counts the sandbox active). */
  private busy = 0
  private readonly slots: Semaphore
  private readonly execContext: ExecContext
  private readonly shell: PersistentShellRunner<DaytonaShellSession>

  constructor(
    readonly ref: SandboxRef,
    /** The SDK's sandbox object (exposed for diagnostics and tests). */
    readonly remote: RemoteSandbox,
    private readonly settings: DaytonaSandboxSettings,
    private readonly context: HandleContext,
    private readonly onClose?: (sandbox: DaytonaSandbox) => void,
  ) {
    this.slots = new Semaphore(settings.maxConcurrentExecs)
    this.execContext = {
      remote,
      sandboxId: ref.id,
      options: context.options,
      call: (call, timeoutSec) => this.call(call, timeoutSec),
      fail: (err, what) => this.fail(err, what),
    }
    const binary = context.options.agentBinaryPath
    if (binary) this.processes = uploadedAgentProcesses(this, binary, 'providers.daytona')
    this.shell = new PersistentShellRunner(
      daytonaShellTransport({
        remote,
        sandboxId: ref.id,
        cwd: settings.cwd,
        requestTimeoutSec: Math.ceil(context.options.requestTimeoutMs / 1000),
        pollIntervalMs: context.options.pollIntervalMs,
        fail: (err, what) => this.fail(err, what),
      }),
    )
  }

  private assertOpen(): void {
    if (this.closed) {
      throw new AppError(
        'BAD_REQUEST',
        `handle of sandbox ${this.ref.id} is closed; call provider.connect(ref) again`,
      )
    }
  }

  /** Maps a toolbox failure; a sandbox that is gone or stopped becomes `SANDBOX_LOST`. */
  async fail(err: unknown, what: string): Promise<AppError> {
    if (err instanceof AppError) return err
    if (mayBeLost(err)) {
      const lost = await this.context.checkLost(this.ref.id).catch(() => undefined)
      if (lost) return lost
    }
    return mapDaytonaError(err, this.context.scope, what, this.ref.id)
  }

  /** One raw daemon call (no slot, no wrapper). */
  async call(call: DaemonCall, timeoutSec: number): Promise<{ exitCode: number; result: string }> {
    const response = await this.using(
      this.remote.process.executeCommand(call.command, undefined, call.env, timeoutSec),
    )
    return { exitCode: response.exitCode, result: response.result }
  }

  /** Counts `work` as activity of this handle (what the state check of {@link ready} goes by). */
  private using<T>(work: Promise<T>): Promise<T> {
    this.busy++
    return work.finally(() => {
      this.busy--
      this.lastUsed = Date.now()
    })
  }

  /**
   * Before a session's call (the pool asks): when this handle has been idle long enough for
   * Daytona's auto-stop (`stateCheckIdleMs`, default the auto-stop interval less 15 s) or the
   * sandbox's `ttlMinutes` may have run out, one GET finds out what happened meanwhile. A stopped
   * or archived sandbox is started again: its files are kept, what ran in it is gone (the
   * persistent shell starts afresh, saying `shellRestarted`). A deleted one throws `SANDBOX_LOST`
   * before anything runs, so the session moves to a fresh sandbox (`sandboxReplaced`).
   */
  async ready(opts: { signal?: AbortSignal } = {}): Promise<void> {
    this.assertOpen()
    if (this.busy > 0 || !this.mayHaveStopped(Date.now())) return
    const found = await this.using(
      this.context.revive(this.remote, `checking sandbox ${this.ref.id} before a call`, opts.signal),
    )
    // Started again: whatever ran before is gone, the shell's session included.
    if (found === 'restarted') await this.shell.close()
  }

  private mayHaveStopped(now: number): boolean {
    const idle = now - this.lastUsed
    const given = this.context.options.stateCheckIdleMs
    if (given !== undefined) return idle >= given
    const autoStop = this.remote.autoStopInterval ?? 0
    if (autoStop > 0 && idle >= autoStop * MINUTE_MS - STATE_CHECK_MARGIN_MS) return true
    const ttl = this.context.options.ttlMinutes
    const created = Date.parse(this.remote.createdAt ?? '')
    return (
      ttl !== undefined &&
      Number.isFinite(created) &&
      now >= created + ttl * MINUTE_MS - STATE_CHECK_MARGIN_MS
    )
  }

  /** Makes sure `dir` exists and is writable (create time: the profile cwd). */
  async ensureDir(dir: string): Promise<void> {
    let response: { exitCode: number; result: string }
    try {
      response = await this.call(mkdirCall(dir), 30)
    } catch (err) {
      throw await this.fail(err, `creating ${dir} in sandbox ${this.ref.id}`)
    }
    if (response.exitCode !== 0) {
      throw new AppError(
        'CONFIG_INVALID',
        `cannot create the profile cwd ${dir} in sandbox ${this.ref.id} (${response.result.trim()}); ` +
          `set the profile's cwd to a directory the sandbox user can create (e.g. under /tmp or its home)`,
      )
    }
  }

  async exec(request: ExecRequest, opts: ExecOptions = {}): Promise<ExecResult> {
    this.assertOpen()
    const resolved = resolveExecRequest(request, {
      cwd: this.settings.cwd,
      maxCommandBytes: MAX_COMMAND_BYTES,
      envName: (key) => ENV_NAME.test(key) && !key.startsWith('__SBX_'),
      envRule: "Daytona accepts names of letters, digits and '_' not starting with a digit (and not __SBX_*)",
      persistentShell: true,
    })
    if (request.shell === 'persistent') {
      const run = await this.shell.run({ ...resolved, cwdGiven: request.cwd !== undefined }, opts)
      void this.using(run.settled)
      return raceAbort(run.result, opts.signal)
    }
    const release = await this.slots.acquire(opts.signal)
    const run = startRun(this.execContext, resolved, opts)
    // The slot frees when the daemon is done with the command, not when an abort rejects early.
    void run.settled.then(release)
    void this.using(run.settled)
    return run.result
  }

  private absolute(path: string): string {
    return resolveSandboxPath(this.settings.cwd, path)
  }

  async writeFile(
    path: string,
    data: string | Uint8Array,
    opts: { signal?: AbortSignal } = {},
  ): Promise<void> {
    this.assertOpen()
    const absolute = this.absolute(path)
    const bytes = typeof data === 'string' ? Buffer.from(data, 'utf8') : Buffer.from(data)
    const timeoutSec = Math.ceil(this.context.options.requestTimeoutMs / 1000)
    try {
      await raceAbort(this.using(this.remote.fs.uploadFile(bytes, absolute, timeoutSec)), opts.signal)
    } catch (err) {
      if (opts.signal?.aborted) throw opts.signal.reason
      throw await this.fail(err, `writing ${absolute} in sandbox ${this.ref.id}`)
    }
  }

  async readFile(path: string, opts: { signal?: AbortSignal } = {}): Promise<Uint8Array> {
    this.assertOpen()
    const absolute = this.absolute(path)
    const timeoutSec = Math.ceil(this.context.options.requestTimeoutMs / 1000)
    try {
      return await raceAbort(this.using(this.remote.fs.downloadFile(absolute, timeoutSec)), opts.signal)
    } catch (err) {
      if (opts.signal?.aborted) throw opts.signal.reason
      throw await this.readError(err, absolute)
    }
  }

  private async readError(err: unknown, absolute: string): Promise<AppError> {
    const where = `${absolute} in sandbox ${this.ref.id}`
    if (err instanceof DaytonaNotFoundError && err.code?.startsWith('FILE_')) {
      return new AppError('NOT_FOUND', `no such file: ${where}`, { cause: err })
    }
    if (isFileAccessDenied(err)) {
      return new AppError(
        'BAD_REQUEST',
        `cannot read ${where}: permission denied (the sandbox user may not read it); read a file the ` +
          'sandbox user can access, or change its mode first (chmod, as its owner)',
        { cause: err },
      )
    }
    if (
      err instanceof DaytonaInvalidFilePathError ||
      (err instanceof DaytonaError && err.code === 'INVALID_FILE_PATH')
    ) {
      return new AppError(
        'BAD_REQUEST',
        `cannot read ${where}: not a regular file; pass the path of a file`,
        {
          cause: err,
        },
      )
    }
    // A per-file error without structured details (older daemons): ask the sandbox what is there.
    if (err instanceof DaytonaError && err.statusCode === undefined && !mayBeLost(err)) {
      const kind = await this.call(probeCall(absolute), 30).then(
        (r) => r.result.trim(),
        () => undefined,
      )
      if (kind === 'missing') return new AppError('NOT_FOUND', `no such file: ${where}`, { cause: err })
      if (kind === 'dir') {
        return new AppError('BAD_REQUEST', `cannot read ${where}: it is a directory; pass the path of a file`)
      }
    }
    return this.fail(err, `reading ${where}`)
  }

  /** A connection to `port` through Daytona's preview proxy (its 502 says the port is closed). */
  async openPort(port: number, opts: { signal?: AbortSignal } = {}): Promise<PortStream> {
    this.assertOpen()
    try {
      return await openDaytonaPort(this.remote, port, opts)
    } catch (err) {
      throw await this.fail(err, `opening the preview of port ${port} of sandbox ${this.ref.id}`)
    }
  }

  async health(): Promise<SandboxHealth> {
    if (this.closed) return { ok: false, reason: `handle of sandbox ${this.ref.id} is closed` }
    try {
      const response = await this.remote.process.executeCommand('true', undefined, undefined, 10)
      return response.exitCode === 0
        ? { ok: true }
        : { ok: false, reason: `probe exited ${response.exitCode}` }
    } catch (err) {
      return { ok: false, reason: (await this.fail(err, `probing sandbox ${this.ref.id}`)).message }
    }
  }

  async close(): Promise<void> {
    if (this.closed) return
    this.closed = true
    await this.shell.close()
    this.onClose?.(this)
  }
}
