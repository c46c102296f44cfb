import {
  AppError,
  type ExecOptions,
  type ExecRequest,
  type ExecResult,
  PersistentShellRunner,
  type PortStream,
  probeLanguages,
  raceAbort,
  resolveExecRequest,
  resolveSandboxPath,
  type Sandbox,
  type SandboxCode,
  type SandboxHealth,
  type SandboxProcesses,
  type SandboxRef,
  type SandboxTerminal,
  Semaphore,
  type TerminalOptions,
  uploadedAgentProcesses,
} from '../../src/sandbox/index.js'
import { type Sandbox as E2BSdkSandbox, SandboxError, SandboxNotFoundError, TimeoutError } from 'e2b'
import { type ErrorContext, type ErrorSite, mapE2BError, networkCode } from './errors.js'
import { type ExecContext, startExec } from './exec.js'
import type { Lifetime } from './lifetime.js'
import type { ResolvedE2BProviderOptions } from './options.js'
import { type E2BShellProcess, e2bShellTransport } from './shell.js'
import { openE2BPort } from './preview.js'
import { e2bCode } from './code.js'
import { openE2BTerminal } from './terminal.js'

/** What a handle knows about its sandbox (from the profile, or from metadata on connect). */
export interface E2BSandboxSettings {
  /** Default working directory; relative paths resolve against it. */
  cwd: string
  /** Commands run at once through this handle; more wait for a slot. */
  maxConcurrentExecs: number
  lifetime: Lifetime
  options: ResolvedE2BProviderOptions
  errors: ErrorContext
}

/** The wrapped command must fit in one argv string of the sandbox (Linux MAX_ARG_STRLEN is 128 KiB). */
const MAX_COMMAND_BYTES = 100 * 1024

/**
 * A handle to one E2B sandbox: commands through the in-sandbox wrapper (our timeout, caps and
 * cancel), files through envd's `/files`, and the sandbox's server-side lifetime refreshed on use.
 */
export class E2BSandbox implements Sandbox {
  /** Background processes, where `agentBinaryPath` is set (the agent is uploaded on first use). */
  readonly processes?: SandboxProcesses
  /** E2B's code interpreter (`@e2b/code-interpreter`), see `code.ts`. */
  readonly code: SandboxCode
  /** Commands take `shell: 'persistent'`: a long-lived bash per handle (see `shell.ts`). */
  readonly persistentShell = true
  /** Ports are reached through E2B's preview hosts (`getHost`), see `preview.ts`. */
  readonly ports = true
  /** Terminals are E2B's own PTYs (`sandbox.pty`), see `terminal.ts`. */
  readonly terminals = true
  private closed = false
  /** Terminals opened through this handle and still open; closing the handle closes them. */
  private readonly openTerminals = new Set<SandboxTerminal>()
  private readonly shell: PersistentShellRunner<E2BShellProcess>
  private readonly slots: Semaphore
  private readonly execContext: ExecContext

  constructor(
    private readonly sdk: E2BSdkSandbox,
    readonly ref: SandboxRef,
    private readonly settings: E2BSandboxSettings,
    private readonly onClose?: (sandbox: E2BSandbox) => void,
  ) {
    this.slots = new Semaphore(settings.maxConcurrentExecs)
    const o = settings.options
    this.execContext = {
      sdk,
      sandboxId: ref.id,
      requestTimeoutMs: o.requestTimeoutMs,
      deadlineBufferMs: o.commandDeadlineBufferMs,
      stdinChunkBytes: o.stdinChunkBytes,
      helperTimeoutMs: o.helperTimeoutMs,
      exitLingerMs: o.exitLingerMs,
      classify: (err, what) => this.classify(err, { what, sandboxId: ref.id, envd: true }),
    }
    this.code = e2bCode(
      ref.id,
      {
        apiKey: o.apiKey,
        requestTimeoutMs: o.requestTimeoutMs,
        ...(o.apiUrl ? { apiUrl: o.apiUrl } : {}),
        ...(o.sandboxUrl ? { sandboxUrl: o.sandboxUrl } : {}),
        ...(o.domain ? { domain: o.domain } : {}),
      },
      (err) => this.classify(err, { what: 'run code', sandboxId: ref.id, envd: true }),
      (opts) => probeLanguages(this, opts?.signal),
    )
    if (o.agentBinaryPath) this.processes = uploadedAgentProcesses(this, o.agentBinaryPath, 'providers.e2b')
    this.shell = new PersistentShellRunner(
      e2bShellTransport({
        sdk,
        sandboxId: ref.id,
        cwd: settings.cwd,
        requestTimeoutMs: o.requestTimeoutMs,
        helperTimeoutMs: o.helperTimeoutMs,
        classify: this.execContext.classify,
      }),
    )
  }

  /**
   * Maps an error of an operation on this sandbox. The SDK reports a vanished sandbox on envd
   * calls as SandboxNotFoundError on a command start, but as TimeoutError (HTTP 502) or a generic
   * SandboxError elsewhere; those are settled by asking the control plane whether it still runs.
   */
  async classify(err: unknown, site: ErrorSite): Promise<AppError> {
    if (err instanceof AppError) return err
    const ambiguous =
      !(err instanceof SandboxNotFoundError) &&
      (err instanceof TimeoutError || err instanceof SandboxError || networkCode(err) !== undefined)
    if (ambiguous) {
      try {
        const info = await this.sdk.getInfo({ requestTimeoutMs: this.settings.options.requestTimeoutMs })
        if (info.state === 'paused') {
          return new AppError(
            'SANDBOX_LOST',
            `sandbox ${this.ref.id} is paused in E2B; destroy it and create a new sandbox`,
          )
        }
      } catch (probeErr) {
        if (probeErr instanceof SandboxNotFoundError) return mapE2BError(probeErr, site, this.settings.errors)
      }
    }
    return mapE2BError(err, site, this.settings.errors)
  }

  private assertOpen(): void {
    if (this.closed) {
      throw new AppError(
        'BAD_REQUEST',
        `handle of sandbox ${this.ref.id} is closed; call provider.connect(ref) again`,
      )
    }
  }

  /** Refreshes the server-side lifetime in the background (failures surface on the operation itself). */
  private keepAlive(minMs = 0): void {
    this.settings.lifetime.touch(minMs).catch(() => undefined)
  }

  async exec(request: ExecRequest, opts: ExecOptions = {}): Promise<ExecResult> {
    this.assertOpen()
    const resolved = resolveExecRequest(request, {
      cwd: this.settings.cwd,
      maxCommandBytes: MAX_COMMAND_BYTES,
      persistentShell: true,
    })
    if (request.shell === 'persistent') {
      this.keepAlive(request.timeoutMs + this.settings.options.commandDeadlineBufferMs)
      const run = await this.shell.run({ ...resolved, cwdGiven: request.cwd !== undefined }, opts)
      return raceAbort(run.result, opts.signal)
    }
    const release = await this.slots.acquire(opts.signal)
    this.keepAlive(request.timeoutMs + this.settings.options.commandDeadlineBufferMs)
    const run = startExec(this.execContext, resolved, opts)
    // The slot is free once the command stops running in the sandbox, not when an abort rejects early.
    void run.settled.then(release)
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
    opts.signal?.throwIfAborted()
    this.keepAlive()
    const body = typeof data === 'string' ? data : new Blob([data])
    try {
      await raceAbort(
        this.sdk.files.write(absolute, body, {
          useOctetStream: true,
          requestTimeoutMs: this.settings.options.requestTimeoutMs,
          ...(opts.signal ? { signal: opts.signal } : {}),
        }),
        opts.signal,
      )
    } catch (err) {
      if (opts.signal?.aborted) throw opts.signal.reason
      throw await this.classify(err, { what: `writing ${absolute}`, sandboxId: this.ref.id, envd: true })
    }
  }

  async readFile(path: string, opts: { signal?: AbortSignal } = {}): Promise<Uint8Array> {
    this.assertOpen()
    const absolute = this.absolute(path)
    opts.signal?.throwIfAborted()
    this.keepAlive()
    try {
      return await raceAbort(
        this.sdk.files.read(absolute, {
          format: 'bytes',
          requestTimeoutMs: this.settings.options.requestTimeoutMs,
          ...(opts.signal ? { signal: opts.signal } : {}),
        }),
        opts.signal,
      )
    } catch (err) {
      if (opts.signal?.aborted) throw opts.signal.reason
      const mapped = await this.classify(err, {
        what: `reading ${absolute}`,
        sandboxId: this.ref.id,
        envd: true,
      })
      if (mapped.code === 'NOT_FOUND') {
        throw new AppError('NOT_FOUND', `no such file: ${absolute} in sandbox ${this.ref.id}`, {
          cause: mapped.cause,
        })
      }
      throw mapped
    }
  }

  /** A connection to `port` through E2B's sandbox proxy (its 502 says the port is closed). */
  async openPort(port: number, opts: { signal?: AbortSignal } = {}): Promise<PortStream> {
    this.assertOpen()
    return openE2BPort(this.sdk, port, { previewUrl: this.settings.options.previewUrl, signal: opts.signal })
  }

  /** A terminal on an E2B PTY (see {@link openE2BTerminal}). */
  async openTerminal(opts: TerminalOptions): Promise<SandboxTerminal> {
    this.assertOpen()
    const terminal = await openE2BTerminal(
      {
        sdk: this.sdk,
        sandboxId: this.ref.id,
        cwd: this.settings.cwd,
        requestTimeoutMs: this.settings.options.requestTimeoutMs,
        classify: (err, what) => this.classify(err, { what, sandboxId: this.ref.id, envd: true }),
        onUse: () => this.keepAlive(),
        keepAliveMs: Math.max(1000, Math.floor(this.settings.lifetime.ttlMs / 4)),
      },
      opts,
    )
    this.openTerminals.add(terminal)
    void terminal.exited.then(() => this.openTerminals.delete(terminal))
    return terminal
  }

  async health(): Promise<SandboxHealth> {
    try {
      const running = await this.sdk.isRunning({ requestTimeoutMs: this.settings.options.requestTimeoutMs })
      return running ? { ok: true } : { ok: false, reason: `sandbox ${this.ref.id} is not running in E2B` }
    } catch (err) {
      const mapped = await this.classify(err, { what: 'checking health', sandboxId: this.ref.id, envd: true })
      return { ok: false, reason: mapped.message }
    }
  }

  async close(): Promise<void> {
    if (this.closed) return
    this.closed = true
    for (const terminal of this.openTerminals) terminal.close()
    await this.shell.close()
    this.onClose?.(this)
  }
}
