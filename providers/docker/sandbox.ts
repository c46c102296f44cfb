import type Docker from 'dockerode'
import { posix } from 'node:path'
import type { Duplex } from 'node:stream'
import {
  AgentProcesses,
  AppError,
  type ExecOptions,
  type ExecRequest,
  type ExecResult,
  raceAbort,
  resolveExecRequest,
  resolveSandboxPath,
  type Sandbox,
  type SandboxHealth,
  type SandboxProcesses,
  type SandboxRef,
  type SandboxTerminal,
  Semaphore,
  type TerminalOptions,
} from '../../src/sandbox/index.js'
import { AgentChannel } from './channel.js'
import type { DirectOffer } from './direct-channel.js'
import { SETUP_HINT, engineStatus, mapEngineError, stoppedState } from './errors.js'
import { type ExecRun, startExec } from './exec.js'
import { readFileOp, writeFileOp } from './files.js'
import { type ErrFrame, MAX_FRAME_BYTES, encodePortOpen, encodePtyOpen } from './protocol.js'
import { agentTerminal, openAgentStream } from './streams.js'

/** Env variables one command may carry: the agent refuses more (providers/docker/agent, `npairs`). */
const MAX_ENV_VARS = 4096

/** What a handle needs to know about its container (from the profile, or from labels on connect). */
export interface DockerSandboxSettings {
  /** Default working directory of commands; relative paths resolve against it. */
  cwd: string
  /** `uid:gid` commands run as. */
  user: string
  /** Commands this handle runs at once; more wait for a slot. */
  maxConcurrentExecs: number
  agentPath: string
  helloTimeoutMs: number
  watchdogMs: number
  maxReadFileBytes: number
  pingTimeoutMs: number
  /** A file operation with no answer this long fails with SANDBOX_TIMEOUT (and drops the channel). */
  fileOpTimeoutMs: number
  /** Offers the agent a direct channel (a socket of ours; providers/docker/direct-channel.ts), if the container has one. */
  offerDirect?: () => Promise<DirectOffer | undefined>
}

/** An agent from before ports and terminals answers their frames "unknown frame type". */
function olderAgent(sandboxId: string, e: ErrFrame): AppError | undefined {
  if (e.op !== 'protocol' || e.detail !== 'unknown frame type') return undefined
  return new AppError(
    'UNSUPPORTED',
    `sandbox ${sandboxId} runs an sbx-agent without ports and terminals (an image built before them); ${SETUP_HINT} to rebuild the base image, then create a new sandbox`,
  )
}

/** Leaves room in one EXEC frame for the command, env and cwd. */
const MAX_STDIN_BYTES = MAX_FRAME_BYTES - 1024 * 1024
/** The command travels in the same frame: bounded like stdin (the frame's own limit, not a new one). */
const MAX_COMMAND_BYTES = MAX_STDIN_BYTES

/**
 * A handle to one container. It holds one agent channel, opened lazily and re-opened after a lost
 * connection while the container still runs; when the container is gone every call fails with
 * `SANDBOX_LOST`.
 */
export class DockerSandbox implements Sandbox {
  private current: AgentChannel | undefined
  private opening: Promise<AgentChannel> | undefined
  private closed = false
  private readonly slots: Semaphore
  /** Persistent shell calls run one at a time (the agent refuses a second one while one runs). */
  private readonly shellTurn = new Semaphore(1)
  private readonly container: Docker.Container
  /** Ports and terminals are streams of the agent channel (agent/ports.c): no container network. */
  readonly ports = true
  readonly terminals = true
  /** Background processes, kept by the agent's supervisors in the container (any handle serves them). */
  readonly processes: SandboxProcesses
  /** Whether the image has bash (learnt from the agent when the channel opened). */
  private hasBash = true

  constructor(
    docker: Docker,
    readonly ref: SandboxRef,
    private readonly settings: DockerSandboxSettings,
    private readonly onClose?: (sandbox: DockerSandbox) => void,
  ) {
    this.container = docker.getContainer(ref.id)
    this.slots = new Semaphore(settings.maxConcurrentExecs)
    this.processes = new AgentProcesses((r, o) => this.exec(r, o), settings.agentPath, ref.id)
  }

  /**
   * The agent holds one persistent bash per channel: true where the image has /bin/bash (known once
   * `create`/`connect` returned the handle); images without bash run every command fresh (`/bin/sh`).
   */
  get persistentShell(): boolean {
    return this.hasBash
  }

  /** Opens the channel now (create/connect fail fast instead of on the first command). */
  async open(signal?: AbortSignal, checkState = true): Promise<void> {
    await this.channel(signal, checkState)
  }

  /** No I/O while the channel is up; after it dropped, the container's state decides (`SANDBOX_LOST`). */
  async ready(opts: { signal?: AbortSignal } = {}): Promise<void> {
    await this.channel(opts.signal)
  }

  private async channel(signal?: AbortSignal, checkState = true): Promise<AgentChannel> {
    if (this.closed) {
      throw new AppError(
        'BAD_REQUEST',
        `handle of sandbox ${this.ref.id} is closed; call provider.connect(ref) again`,
      )
    }
    if (this.current && !this.current.closed) return this.current
    this.opening ??= (async () => {
      try {
        if (checkState) await this.assertRunning()
        const channel = await AgentChannel.open(this.container, {
          sandboxId: this.ref.id,
          user: this.settings.user,
          agentPath: this.settings.agentPath,
          helloTimeoutMs: this.settings.helloTimeoutMs,
          ...(this.settings.offerDirect ? { offerDirect: this.settings.offerDirect } : {}),
        })
        if (this.closed) channel.close()
        this.hasBash = channel.hasBash
        this.current = channel
        return channel
      } finally {
        this.opening = undefined
      }
    })()
    return raceAbort(this.opening, signal)
  }

  private async assertRunning(): Promise<void> {
    let info: Docker.ContainerInspectInfo
    try {
      info = await this.container.inspect()
    } catch (err) {
      if (engineStatus(err) === 404) {
        throw new AppError(
          'SANDBOX_LOST',
          `sandbox ${this.ref.id} no longer exists (destroyed?); create a new sandbox`,
          {
            cause: err,
          },
        )
      }
      throw mapEngineError(err, `inspecting sandbox ${this.ref.id}`, this.ref.id)
    }
    const state = info.State
    if (!state.Running || state.Paused || state.Restarting) {
      throw new AppError(
        'SANDBOX_LOST',
        `sandbox ${this.ref.id} is not running (${stoppedState(state.Status, state.ExitCode)}); destroy it and create a new sandbox`,
      )
    }
  }

  async exec(request: ExecRequest, opts: ExecOptions = {}): Promise<ExecResult> {
    const resolved = resolveExecRequest(request, {
      cwd: this.settings.cwd,
      maxCommandBytes: MAX_COMMAND_BYTES,
      providerName: 'the Docker provider',
      persistentShell: true,
    })
    if (resolved.stdin.length > MAX_STDIN_BYTES) {
      throw new AppError(
        'PAYLOAD_TOO_LARGE',
        `stdin of ${resolved.stdin.length} bytes exceeds ${MAX_STDIN_BYTES}; write a file and redirect it instead`,
      )
    }
    const envCount = Object.keys(resolved.env).length
    if (envCount > MAX_ENV_VARS)
      throw new AppError(
        'BAD_REQUEST',
        `${envCount} env variables: the Docker sandbox takes at most ${MAX_ENV_VARS}; pass fewer (or a file)`,
      )
    const persistent = request.shell === 'persistent'
    if (persistent && !this.hasBash)
      throw new AppError(
        'BAD_REQUEST',
        `sandbox ${this.ref.id}: its image has no /bin/bash, which the persistent shell needs; run the ` +
          `command with shell: 'fresh' (it uses /bin/sh), or use an image with bash`,
      )
    // A persistent call waits for the shell's turn before its slot and timeout start.
    const releaseTurn = persistent ? await this.shellTurn.acquire(opts.signal) : () => {}
    let release: () => void
    try {
      release = await this.slots.acquire(opts.signal)
    } catch (err) {
      releaseTurn()
      throw err
    }
    let run: ExecRun
    try {
      const channel = await this.channel(opts.signal)
      run = startExec(
        channel,
        { ...resolved, ...(persistent ? { shell: { cwdExplicit: request.cwd !== undefined } } : {}) },
        opts,
        this.settings.watchdogMs,
      )
    } catch (err) {
      release()
      releaseTurn()
      throw err
    }
    // The slot is free once the agent stops running the command, not when an abort rejects early.
    void run.settled.then(() => {
      release()
      releaseTurn()
    })
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
    const absolute = this.absolute(path)
    const channel = await this.channel(opts.signal)
    const bytes = typeof data === 'string' ? Buffer.from(data, 'utf8') : data
    await writeFileOp(channel, absolute, bytes, {
      signal: opts.signal,
      timeoutMs: this.settings.fileOpTimeoutMs,
      pingTimeoutMs: this.settings.pingTimeoutMs,
    })
  }

  async readFile(path: string, opts: { signal?: AbortSignal } = {}): Promise<Uint8Array> {
    const absolute = this.absolute(path)
    const channel = await this.channel(opts.signal)
    return readFileOp(channel, absolute, this.settings.maxReadFileBytes, {
      signal: opts.signal,
      timeoutMs: this.settings.fileOpTimeoutMs,
      pingTimeoutMs: this.settings.pingTimeoutMs,
    })
  }

  async openPort(port: number, opts: { signal?: AbortSignal } = {}): Promise<Duplex> {
    if (!Number.isInteger(port) || port < 1 || port > 65535)
      throw new AppError('BAD_REQUEST', `port ${port} is not a TCP port; give one of 1-65535`)
    const channel = await this.channel(opts.signal)
    const id = channel.allocateId()
    const { stream } = await openAgentStream(
      channel,
      id,
      encodePortOpen(id, port),
      (e) =>
        e.op === 'connect'
          ? new AppError(
              'PORT_UNREACHABLE',
              `${e.detail}: start a server listening on port ${port} inside the sandbox (e.g. \`httpd -f -p ${port}\` in the background), then retry`,
            )
          : (olderAgent(this.ref.id, e) ??
            new AppError(
              e.op === 'limit' ? 'QUOTA_EXCEEDED' : 'INTERNAL',
              `opening port ${port}: ${e.op}: ${e.detail}`,
            )),
      opts.signal,
    )
    return stream
  }

  async openTerminal(opts: TerminalOptions): Promise<SandboxTerminal> {
    const { cols, rows } = opts
    for (const [name, v] of [
      ['cols', cols],
      ['rows', rows],
    ] as const) {
      if (!Number.isInteger(v) || v < 1 || v > 65535)
        throw new AppError('BAD_REQUEST', `terminal ${name} ${v} is out of range; give an integer of 1-65535`)
    }
    const cwd = opts.cwd ? posix.resolve(this.settings.cwd, opts.cwd) : this.settings.cwd
    const channel = await this.channel(opts.signal)
    const id = channel.allocateId()
    const { stream, pid } = await openAgentStream(
      channel,
      id,
      encodePtyOpen(id, {
        cols,
        rows,
        cwd,
        command: opts.command ?? '',
        env: { TERM: 'xterm-256color', ...(opts.env ?? {}) },
      }),
      (e) =>
        olderAgent(this.ref.id, e) ??
        new AppError(
          e.op === 'chdir' ? 'BAD_REQUEST' : e.op === 'limit' ? 'QUOTA_EXCEEDED' : 'INTERNAL',
          e.op === 'chdir'
            ? `terminal cwd ${e.detail} does not exist in the sandbox; create it or pick another`
            : `opening a terminal: ${e.op}: ${e.detail}`,
        ),
      opts.signal,
    )
    return agentTerminal(stream, pid)
  }

  async health(): Promise<SandboxHealth> {
    try {
      const channel = await this.channel()
      await channel.ping(this.settings.pingTimeoutMs)
      return { ok: true }
    } catch (err) {
      return { ok: false, reason: err instanceof Error ? err.message : String(err) }
    }
  }

  /**
   * The container was removed: ends the channel so running and later calls fail with
   * `SANDBOX_LOST` at once. (runc's engine ends a removed container's exec streams itself; with
   * gVisor's runsc they stay open until the command's own timeout.)
   */
  containerRemoved(): void {
    this.current?.close(
      new AppError('SANDBOX_LOST', `sandbox ${this.ref.id} was destroyed; create a new sandbox`),
    )
  }

  async close(): Promise<void> {
    if (this.closed) return
    this.closed = true
    this.current?.close()
    await this.opening?.catch(() => undefined)
    this.onClose?.(this)
  }
}
