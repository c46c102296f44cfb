import { createHash } from 'node:crypto'
import { readFile } from 'node:fs/promises'
import { constants } from 'node:os'
import { AppError, type ErrorCode } from '../errors.js'
import type {
  ExecOptions,
  ExecRequest,
  ExecResult,
  OutputSlice,
  ProcessInfo,
  ProcessOutput,
  ProcessStartRequest,
  Sandbox,
  SandboxProcesses,
} from './types.js'

/** Where the agent keeps the state of a sandbox's background processes (providers/docker/agent/procs.c). */
export const PROCESS_ROOT = '/tmp/.sbx-proc'
/**
 * Process root of the agent uploaded into a remote sandbox (E2B, Daytona). Kept apart from
 * {@link PROCESS_ROOT}: a remote sandbox can itself be one of our Docker sandboxes (the E2B provider
 * pointed at our own E2B endpoint), whose agent keeps the endpoint's commands under PROCESS_ROOT;
 * sharing it would count those commands against the remote handle's `maxRunning`.
 */
export const REMOTE_PROCESS_ROOT = '/tmp/.sbx/proc'

/** `ProcessStartRequest.backpressureIdleMs` by default: three of the E2B stream's 5-s long polls. */
export const DEFAULT_BACKPRESSURE_IDLE_MS = 15_000

/** One `--proc-*` run of the agent answers within this long (writes to a stuck stdin give up at 5 s). */
const OP_TIMEOUT_MS = 30_000
/** The longest a read waits for new output (below {@link OP_TIMEOUT_MS}). */
export const MAX_READ_WAIT_MS = 20_000
/** Room for the JSON answer of a read: base64 of two slices plus the command line. */
const OP_OUTPUT_CAP = 32 * 1024 * 1024

const SIGNAL_NUMBERS: Record<string, number> = constants.signals as Record<string, number>

/** The number of a signal name (`SIGTERM` or `TERM`); `BAD_REQUEST` naming a few valid ones otherwise. */
export function signalNumber(name: string): number {
  const key = name.toUpperCase().startsWith('SIG') ? name.toUpperCase() : `SIG${name.toUpperCase()}`
  const n = SIGNAL_NUMBERS[key]
  if (n === undefined)
    throw new AppError(
      'BAD_REQUEST',
      `unknown signal ${JSON.stringify(name)}; use a name such as SIGTERM, SIGKILL, SIGINT or SIGHUP`,
    )
  return n
}

/** The name of a signal number (`SIG<n>` when Node does not know it). */
export function signalName(n: number): string {
  return Object.entries(SIGNAL_NUMBERS).find(([, v]) => v === n)?.[0] ?? `SIG${n}`
}

/** The agent's JSON of one process. */
interface RawProcess {
  id: string
  command: string
  pid: number
  state: ProcessInfo['state']
  exitCode: number | null
  signal: number | null
  startedAt: number
  endedAt: number | null
  stdinClosed: boolean
  stdoutBytes: number
  stderrBytes: number
}

interface RawSlice {
  offset: number
  next: number
  dropped: number
  data: string
}

const AGENT_ERRORS: Record<string, ErrorCode> = {
  NOT_FOUND: 'NOT_FOUND',
  CONFLICT: 'CONFLICT',
  BAD_REQUEST: 'BAD_REQUEST',
  LIMIT: 'QUOTA_EXCEEDED',
  NO_SPACE: 'NO_SPACE',
  SANDBOX_TIMEOUT: 'SANDBOX_TIMEOUT',
}

function toInfo(p: RawProcess): ProcessInfo {
  return {
    id: p.id,
    command: p.command,
    pid: p.pid,
    state: p.state,
    exitCode: p.exitCode,
    signal: p.signal === null ? null : signalName(p.signal),
    startedAt: p.startedAt,
    endedAt: p.endedAt,
    stdinClosed: p.stdinClosed,
    stdoutBytes: p.stdoutBytes,
    stderrBytes: p.stderrBytes,
  }
}

/** Bytes at the end of `b` that start a UTF-8 character not complete within `b` (0–3). */
function incompleteTail(b: Buffer): number {
  for (let back = 1; back <= Math.min(3, b.length); back++) {
    const byte = b[b.length - back]!
    if ((byte & 0xc0) === 0x80) continue // a continuation byte: look further back
    const need = byte >= 0xf0 ? 4 : byte >= 0xe0 ? 3 : byte >= 0xc0 ? 2 : 1
    return need > back ? back : 0
  }
  return 0
}

/**
 * One stream's slice as text. A character cut by the end of the slice is left for the next read
 * (`nextOffset` stops before it), unless it is all the slice holds.
 */
function toSlice(s: RawSlice): OutputSlice {
  const bytes = Buffer.from(s.data, 'base64')
  const cut = incompleteTail(bytes)
  const keep = cut < bytes.length ? bytes.length - cut : bytes.length
  return {
    data: bytes.subarray(0, keep).toString('utf8'),
    offset: s.offset,
    nextOffset: s.offset + keep,
    dropped: s.dropped,
  }
}

const quote = (s: string): string => `'${s.replace(/'/g, `'\\''`)}'`

/**
 * {@link SandboxProcesses} of a sandbox, served by the static agent binary's `--proc-*` modes
 * (providers/docker/agent/procs.c) run as ordinary commands through `run`: the state lives in the
 * sandbox (under {@link PROCESS_ROOT}), so any channel of any worker sees the same processes. Any
 * provider whose sandboxes can run that binary can use it; `prepare` (e.g. an upload of the binary)
 * runs before the first operation of the handle and resolves to the binary's path in the sandbox.
 */
export class AgentProcesses implements SandboxProcesses {
  private prepared: Promise<string> | undefined
  /** The sandbox's agent refused the backpressure argument once: it predates it (see {@link start}). */
  private agentLacksBackpressure = false

  constructor(
    private readonly run: (request: ExecRequest, opts?: ExecOptions) => Promise<ExecResult>,
    private readonly agentPath: string,
    private readonly sandboxId: string,
    private readonly prepare?: (signal?: AbortSignal) => Promise<string>,
    /** Directory of the process table in the sandbox. @default {@link PROCESS_ROOT} */
    private readonly root: string = PROCESS_ROOT,
  ) {}

  private async path(signal?: AbortSignal): Promise<string> {
    if (!this.prepare) return this.agentPath
    this.prepared ??= this.prepare(signal).catch((err: unknown) => {
      this.prepared = undefined
      throw err
    })
    return this.prepared
  }

  private async op<T>(
    args: (string | number)[],
    opts: { signal?: AbortSignal | undefined; stdin?: Uint8Array | string; cwd?: string } & Partial<
      Pick<ExecRequest, 'env'>
    > = {},
  ): Promise<T> {
    const agent = await this.path(opts.signal)
    let command = `exec ${quote(agent)} ${args.map((a) => quote(String(a))).join(' ')}`
    // A missing working directory is the caller's mistake, answered as such (not as a failed exec).
    if (opts.cwd !== undefined) {
      const missing = JSON.stringify({
        error: 'BAD_REQUEST',
        message: `no directory ${opts.cwd} in the sandbox (cwd); create it first or pick another`,
      })
      command = `cd -- ${quote(opts.cwd)} 2>/dev/null || { printf '%s\\n' ${quote(missing)}; exit 1; }; ${command}`
    }
    const r = await this.run(
      {
        command,
        timeoutMs: OP_TIMEOUT_MS,
        outputCapBytes: OP_OUTPUT_CAP,
        ...(opts.stdin !== undefined ? { stdin: opts.stdin } : {}),
        ...(opts.env !== undefined ? { env: opts.env } : {}),
      },
      opts.signal ? { signal: opts.signal } : {},
    )
    let parsed: unknown
    try {
      parsed = JSON.parse(r.stdout.trim().split('\n')[0] ?? '')
    } catch {
      if (r.timedOut)
        throw new AppError(
          'SANDBOX_TIMEOUT',
          `the sandbox's process agent did not answer in ${OP_TIMEOUT_MS} ms`,
        )
      throw new AppError(
        'UNSUPPORTED',
        `the agent in sandbox ${this.sandboxId} has no background processes (exit ${r.exitCode ?? r.signal}: ` +
          `${r.stderr.trim().slice(0, 200) || 'no answer'}); rebuild the image with scripts/setup.sh or \`sbx image build\`; on a remote provider, check that the sandbox runs x86-64 Linux binaries`,
      )
    }
    const err = (parsed as { error?: string; message?: string }).error
    if (err !== undefined) {
      const message = (parsed as { message?: string }).message ?? err
      throw new AppError(AGENT_ERRORS[err] ?? 'INTERNAL', message)
    }
    return parsed as T
  }

  async start(
    id: string,
    request: ProcessStartRequest,
    opts: { signal?: AbortSignal } = {},
  ): Promise<ProcessInfo> {
    if (!request.command.trim())
      throw new AppError('BAD_REQUEST', 'command is empty; give a shell command line')
    if (request.command.includes('\0'))
      throw new AppError('BAD_REQUEST', 'command must not contain NUL bytes')
    const idleMs = Math.max(1, Math.round(request.backpressureIdleMs ?? DEFAULT_BACKPRESSURE_IDLE_MS))
    const run = (backpressure: boolean): Promise<RawProcess> =>
      this.op<RawProcess>(
        [
          '--proc-start',
          this.root,
          id,
          request.outputBufferBytes,
          request.maxRunning,
          ...(backpressure ? [idleMs] : []),
        ],
        {
          stdin: request.command,
          signal: opts.signal,
          ...(request.cwd !== undefined ? { cwd: request.cwd } : {}),
          ...(request.env !== undefined ? { env: request.env } : {}),
        },
      )
    // Backpressure is a fifth argument (its idle time), only when asked for. An agent that predates it (a
    // sandbox that outlived an upgrade of the service keeps its agent) refuses the argument before
    // it runs anything: the process then starts as before, without backpressure, and its readers
    // see `dropped` should the buffer overflow (the E2B endpoint ends the stream with that count).
    if (!request.backpressure || this.agentLacksBackpressure) return toInfo(await run(false))
    try {
      return toInfo(await run(true))
    } catch (err) {
      if (!(err instanceof AppError && /malformed --proc-start/.test(err.message))) throw err
      this.agentLacksBackpressure = true
      return toInfo(await run(false))
    }
  }

  async list(opts: { signal?: AbortSignal } = {}): Promise<ProcessInfo[]> {
    const raw = await this.op<{ processes: RawProcess[] }>(['--proc-list', this.root], {
      signal: opts.signal,
    })
    return raw.processes.map(toInfo).sort((a, b) => a.startedAt - b.startedAt || a.id.localeCompare(b.id))
  }

  async read(
    id: string,
    from: { stdoutOffset: number; stderrOffset: number; maxBytes: number; waitMs?: number },
    opts: { signal?: AbortSignal } = {},
  ): Promise<ProcessOutput> {
    const waitMs = Math.max(0, Math.min(from.waitMs ?? 0, MAX_READ_WAIT_MS))
    const raw = await this.op<{ process: RawProcess; stdout: RawSlice; stderr: RawSlice }>(
      ['--proc-read', this.root, id, from.stdoutOffset, from.stderrOffset, from.maxBytes, waitMs],
      { signal: opts.signal },
    )
    return { process: toInfo(raw.process), stdout: toSlice(raw.stdout), stderr: toSlice(raw.stderr) }
  }

  async writeStdin(
    id: string,
    data: Uint8Array,
    close: boolean,
    opts: { signal?: AbortSignal } = {},
  ): Promise<{ written: number; process: ProcessInfo }> {
    const raw = await this.op<{ written: number; process: RawProcess }>(
      ['--proc-stdin', this.root, id, close ? 1 : 0],
      { stdin: data, signal: opts.signal },
    )
    return { written: raw.written, process: toInfo(raw.process) }
  }

  async signal(
    id: string,
    signal: string,
    waitMs: number,
    opts: { signal?: AbortSignal } = {},
  ): Promise<ProcessInfo> {
    const raw = await this.op<RawProcess>(
      ['--proc-signal', this.root, id, signalNumber(signal), Math.max(0, Math.min(waitMs, 10_000))],
      { signal: opts.signal },
    )
    return toInfo(raw)
  }

  async remove(id: string, opts: { signal?: AbortSignal } = {}): Promise<ProcessInfo> {
    return toInfo(await this.op<RawProcess>(['--proc-remove', this.root, id], { signal: opts.signal }))
  }
}

/** Where an uploaded agent binary lives in a remote sandbox: one path per build (see {@link remoteAgentPath}). */
const REMOTE_AGENT_DIR = '/tmp/.sbx'
/** The handle's nominal agent path before the upload names the build's. */
const REMOTE_AGENT_PATH = `${REMOTE_AGENT_DIR}/sbx-agent`

/**
 * The path of one agent build in a remote sandbox, named by a hash of its bytes: a sandbox that
 * outlives a worker upgrade gets the new build beside the old one (whose supervisors keep running)
 * instead of being driven by an old binary that lacks newer modes (e.g. backpressure).
 */
function remoteAgentPath(bytes: Uint8Array): string {
  return `${REMOTE_AGENT_DIR}/sbx-agent-${createHash('sha256').update(bytes).digest('hex').slice(0, 12)}`
}

/** The agent binary's bytes, read once per host path. */
const agentBytes = new Map<string, Promise<Buffer>>()

/** Uploads the agent binary unless the sandbox has this build already; resolves to its path there. */
async function installAgent(
  sandbox: Sandbox,
  hostPath: string,
  configKey: string,
  signal?: AbortSignal,
): Promise<string> {
  const base = { timeoutMs: 30_000, outputCapBytes: 4096 }
  const opts = signal ? { signal } : {}
  let bytes = agentBytes.get(hostPath)
  if (!bytes) {
    bytes = readFile(hostPath)
    agentBytes.set(hostPath, bytes)
  }
  const data = await bytes.catch((err: unknown) => {
    agentBytes.delete(hostPath)
    throw new AppError(
      'UNSUPPORTED',
      `background processes need the agent binary at ${hostPath} (${configKey}.agentBinaryPath): ` +
        `${(err as Error).message}; build it with scripts/setup.sh`,
    )
  })
  const path = remoteAgentPath(data)
  const probe = `test -x ${path} && ${path} --proc-list ${REMOTE_PROCESS_ROOT} >/dev/null 2>&1 && echo ok`
  if ((await sandbox.exec({ ...base, command: probe }, opts)).stdout.trim() === 'ok') return path
  await sandbox.writeFile(path, data, opts)
  const r = await sandbox.exec({ ...base, command: `chmod 700 ${path} && ${probe}` }, opts)
  if (r.stdout.trim() !== 'ok')
    throw new AppError(
      'UNSUPPORTED',
      `the agent binary does not run in sandbox ${sandbox.ref.id} (${r.stderr.trim().slice(0, 200) || `exit ${r.exitCode}`}); ` +
        'background processes need an x86-64 Linux sandbox with a writable, executable /tmp',
    )
  return path
}

/**
 * {@link AgentProcesses} for a sandbox that does not ship the agent (remote providers): before a
 * handle's first process call, the static binary at `hostPath` is uploaded to the sandbox (unless
 * this build is there already, e.g. put by another worker). `configKey` names the provider's config section in
 * errors.
 */
export function uploadedAgentProcesses(
  sandbox: Sandbox,
  hostPath: string,
  configKey: string,
): AgentProcesses {
  return new AgentProcesses(
    (r, o) => sandbox.exec(r, o),
    REMOTE_AGENT_PATH,
    sandbox.ref.id,
    (signal) => installAgent(sandbox, hostPath, configKey, signal),
    REMOTE_PROCESS_ROOT,
  )
}
