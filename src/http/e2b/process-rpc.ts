/**
 * envd's `process.Process` RPC over our background processes: `Start` (and `Connect`) stream the
 * process's events — start with its pid, stdout/stderr chunks (base64), end — `SendInput`,
 * `CloseStdin`, `SendSignal` and `List` act on it by pid or tag. Every command first passes the
 * server's tool-call policy as a `bash` call: a block ends the stream with `permission_denied`
 * and the reason, a modify runs the rewritten command.
 */
import type { ProcessService } from '../deps.js'
import type { ProcessInfo } from '../../sandbox/types.js'
import { AppError } from '../../errors.js'
import { ConnectRpcError, openStream, type ServerStream } from './connect.js'
import type { E2BRouteDeps } from './deps.js'
import { lossOf } from './output-loss.js'
import type { E2BSandbox, E2BSandboxStore } from './sandboxes.js'

type Json = Record<string, unknown>

/** What envd's `process.ProcessConfig` carries. */
interface ProcessConfig {
  cmd: string
  args: string[]
  envs: Record<string, string>
  cwd?: string
}

/** One E2B process: our process id behind an envd pid. */
interface Tracked {
  id: string
  config: ProcessConfig
  tag?: string
}

/** The sandbox's process table (kept in the store, so any API replica can answer for a pid). */
async function trackedOf(store: E2BSandboxStore, s: E2BSandbox): Promise<Map<number, Tracked>> {
  const m = new Map<number, Tracked>()
  for (const [pid, entry] of await store.processes(s.sandboxId)) m.set(pid, JSON.parse(entry) as Tracked)
  return m
}

const obj = (v: unknown): Json => (v && typeof v === 'object' && !Array.isArray(v) ? (v as Json) : {})

function configOf(message: Json): ProcessConfig {
  const p = obj(message.process)
  if (typeof p.cmd !== 'string' || !p.cmd)
    throw new ConnectRpcError('invalid_argument', 'process.cmd is required')
  const args = Array.isArray(p.args) ? p.args.filter((a): a is string => typeof a === 'string') : []
  const envs: Record<string, string> = {}
  for (const [k, v] of Object.entries(obj(p.envs))) if (typeof v === 'string') envs[k] = v
  return { cmd: p.cmd, args, envs, ...(typeof p.cwd === 'string' && p.cwd ? { cwd: p.cwd } : {}) }
}

const quote = (s: string): string => (/^[A-Za-z0-9_./=:@%+-]+$/.test(s) ? s : `'${s.replace(/'/g, `'\\''`)}'`)

/** The shell command line of a config: the script of `bash -l -c <script>` (the SDK's form), else the quoted argv. */
export function commandLineOf(config: ProcessConfig): string {
  const shell = /(^|\/)(ba)?sh$/.test(config.cmd)
  const c = config.args.indexOf('-c')
  if (shell && c >= 0 && c === config.args.length - 2 && config.args.slice(0, c).every((a) => a === '-l'))
    return config.args[c + 1] ?? ''
  return [config.cmd, ...config.args].map(quote).join(' ')
}

async function selected(
  store: E2BSandboxStore,
  s: E2BSandbox,
  message: Json,
): Promise<{ pid: number; t: Tracked }> {
  const sel = obj(obj(message).process)
  const m = await trackedOf(store, s)
  if (typeof sel.pid === 'number') {
    const t = m.get(sel.pid)
    if (t) return { pid: sel.pid, t }
    throw new ConnectRpcError('not_found', `process with pid ${sel.pid} not found`)
  }
  if (typeof sel.tag === 'string') {
    for (const [pid, t] of m) if (t.tag === sel.tag) return { pid, t }
    throw new ConnectRpcError('not_found', `process with tag ${sel.tag} not found`)
  }
  throw new ConnectRpcError('invalid_argument', 'process selector needs a pid or a tag')
}

function service(deps: E2BRouteDeps): ProcessService {
  if (!deps.processes)
    throw new ConnectRpcError('unimplemented', 'this server has no background processes (no sandbox engine)')
  return deps.processes
}

/** Maps our errors onto Connect codes. */
export function connectErrorOf(err: unknown): ConnectRpcError {
  if (err instanceof ConnectRpcError) return err
  if (err instanceof AppError) {
    const code =
      err.code === 'NOT_FOUND'
        ? 'not_found'
        : err.code === 'QUOTA_EXCEEDED' || err.code === 'RATE_LIMITED'
          ? 'resource_exhausted'
          : err.code === 'BAD_REQUEST' || err.code === 'CONFLICT'
            ? 'failed_precondition'
            : err.code === 'UNSUPPORTED'
              ? 'unimplemented'
              : err.code === 'SANDBOX_LOST' || err.code === 'UNAVAILABLE' || err.code === 'ACQUIRE_TIMEOUT'
                ? 'unavailable'
                : 'internal'
    return new ConnectRpcError(code, err.message)
  }
  return new ConnectRpcError('internal', err instanceof Error ? err.message : String(err))
}

/** The end event of a finished process, in envd's words. */
function endEvent(p: ProcessInfo): Json {
  if (p.signal) {
    const name = p.signal.replace(/^SIG/, '').toLowerCase()
    const status = `signal: ${name === 'kill' ? 'killed' : name === 'term' ? 'terminated' : name}`
    return { end: { exitCode: -1, exited: false, status, error: status } }
  }
  const code = p.exitCode ?? -1
  return {
    end: {
      exitCode: code,
      exited: true,
      status: `exit status ${code}`,
      ...(code !== 0 ? { error: `exit status ${code}` } : {}),
    },
  }
}

/** The longest one read of the stream waits for output (and a slow client, between reads that keep its command held back). */
const READ_WAIT_MS = 5_000

/**
 * Streams a process's output from the given offsets to its end (or until the stream ends). At its
 * end the process is forgotten (here at once, in the sandbox 30 s later). It reads no faster than
 * the client takes the stream, so a slow client holds the command back (through the agent's
 * backpressure) instead of queueing its output here. Bytes lost before this stream read them end it
 * with `data_loss` ({@link lossOf}).
 */
async function pump(
  deps: E2BRouteDeps,
  store: E2BSandboxStore,
  s: E2BSandbox,
  pid: number,
  id: string,
  stream: ServerStream,
  from: { stdout: number; stderr: number },
): Promise<void> {
  const svc = service(deps)
  let { stdout, stderr } = from
  while (!stream.ended) {
    // No faster than the client reads: while it is behind, read nothing, but keep telling the
    // sandbox someone reads (a read of no bytes), or the command would stop being held back for it.
    while (!(await stream.ready(READ_WAIT_MS)) && !stream.ended)
      await svc.read(s.tenant, s.sandboxId, id, { stdoutOffset: stdout, stderrOffset: stderr, maxBytes: 0 })
    if (stream.ended) return
    const out = await svc.read(s.tenant, s.sandboxId, id, {
      stdoutOffset: stdout,
      stderrOffset: stderr,
      maxBytes: 65_536,
      waitMs: READ_WAIT_MS,
    })
    // A killed sandbox drops the stream (its session is gone, so the read found nothing or failed).
    if (!out && (await store.gone(s.sandboxId))) return stream.drop()
    if (!out) throw new ConnectRpcError('not_found', `sandbox ${s.sandboxId} is gone`)
    const loss = lossOf(out, pid)
    if (loss) throw loss
    if (out.stdout.data)
      stream.send({ data: { stdout: Buffer.from(out.stdout.data, 'utf8').toString('base64') } })
    if (out.stderr.data)
      stream.send({ data: { stderr: Buffer.from(out.stderr.data, 'utf8').toString('base64') } })
    stdout = out.stdout.nextOffset
    stderr = out.stderr.nextOffset
    const p = out.process
    if (p.state !== 'running' && stdout >= p.stdoutBytes && stderr >= p.stderrBytes) {
      stream.send(endEvent(p))
      stream.end()
      if ((await trackedOf(store, s)).get(pid)?.id === id)
        await store.deleteProcess(s.sandboxId, pid).catch(() => undefined)
      // Kept a while for another stream still reading it (envd keeps an exited pid 30 s).
      setTimeout(() => void svc.remove(s.tenant, s.sandboxId, id).catch(() => undefined), 30_000).unref()
      return
    }
  }
}

/**
 * Ends a process stream on an error. A sandbox killed meanwhile drops the stream, as E2B's does: the
 * SDK then probes `/health` (502 now) and reports the sandbox gone.
 */
async function endOnError(
  store: E2BSandboxStore,
  s: E2BSandbox,
  stream: ServerStream,
  err: unknown,
): Promise<void> {
  if (await store.gone(s.sandboxId)) return stream.drop()
  const e = connectErrorOf(err)
  stream.end({ code: e.code, message: e.message })
}

/** Keepalive pings (the SDK asks with `Keepalive-Ping-Interval`, seconds) and the end of the stream at the call's deadline. */
export function timers(headers: Headers, stream: ServerStream): void {
  const handles: NodeJS.Timeout[] = []
  const keepaliveS = Number(headers.get('keepalive-ping-interval'))
  if (keepaliveS > 0) handles.push(setInterval(() => stream.send({ keepalive: {} }), keepaliveS * 1000))
  const deadline = deadlineOf(headers)
  if (deadline)
    handles.push(
      setTimeout(
        () => stream.end({ code: 'deadline_exceeded', message: `deadline of ${deadline} ms exceeded` }),
        deadline,
      ),
    )
  stream.signal.addEventListener('abort', () => handles.forEach((h) => clearTimeout(h)), { once: true })
}

/** The call's `Connect-Timeout-Ms`, when it sets one. */
function deadlineOf(headers: Headers): number | undefined {
  const ms = Number(headers.get('connect-timeout-ms'))
  return ms > 0 ? ms : undefined
}

/** `Start`: policy, then the process, then its events. */
export async function startProcess(
  deps: E2BRouteDeps,
  store: E2BSandboxStore,
  s: E2BSandbox,
  message: Json,
  headers: Headers,
): Promise<Response> {
  const config = configOf(message)
  const svc = service(deps)
  const verdict = await deps.e2b.policy(s.tenant, s.sandboxId, commandLineOf(config))
  if (verdict.kind === 'block')
    throw new ConnectRpcError('permission_denied', `blocked by policy: ${verdict.reason}`)
  // Without `stdin: true` the command reads EOF, as under envd: redirected here rather than by a
  // second call that closes stdin (one agent round trip less per command).
  const stdin = message.stdin === true
  // With backpressure, as envd: a command writing faster than the client reads waits for it
  // instead of losing output (the stream's reads acknowledge what they consumed).
  const info = await svc.start(s.tenant, s.sandboxId, {
    command: stdin ? verdict.command : `{ ${verdict.command}\n} </dev/null`,
    env: { ...s.envVars, ...config.envs },
    ...(config.cwd ? { cwd: config.cwd } : {}),
    backpressure: true,
  })
  if (!info) throw new ConnectRpcError('not_found', `sandbox ${s.sandboxId} is gone`)
  const entry: Tracked = {
    id: info.id,
    config,
    ...(typeof message.tag === 'string' ? { tag: message.tag } : {}),
  }
  await store.setProcess(s.sandboxId, info.pid, JSON.stringify(entry))
  const { response, stream } = openStream()
  stream.send({ start: { pid: info.pid } })
  timers(headers, stream)
  // The process dies at the call's deadline, as under envd (since March 2025), whether or not the
  // caller is still reading: the timer outlives the stream (a finished process ignores the signal).
  const deadline = deadlineOf(headers)
  if (deadline)
    setTimeout(
      () => void svc.signal(s.tenant, s.sandboxId, info.id, 'SIGKILL', 0).catch(() => undefined),
      deadline,
    ).unref()
  void pump(deps, store, s, info.pid, info.id, stream, { stdout: 0, stderr: 0 }).catch((err: unknown) =>
    endOnError(store, s, stream, err),
  )
  return response
}

/** `Connect`: the events of a running process from now on. */
export async function connectProcess(
  deps: E2BRouteDeps,
  store: E2BSandboxStore,
  s: E2BSandbox,
  message: Json,
  headers: Headers,
): Promise<Response> {
  const { pid, t } = await selected(store, s, message)
  const p = await service(deps).get(s.tenant, s.sandboxId, t.id)
  if (!p) throw new ConnectRpcError('not_found', `process with pid ${pid} not found`)
  const { response, stream } = openStream()
  stream.send({ start: { pid } })
  timers(headers, stream)
  void pump(deps, store, s, pid, t.id, stream, { stdout: p.stdoutBytes, stderr: p.stderrBytes }).catch(
    (err: unknown) => endOnError(store, s, stream, err),
  )
  return response
}

/** The unary methods: `List`, `SendInput`, `CloseStdin`, `SendSignal`. */
export async function unaryProcess(
  deps: E2BRouteDeps,
  store: E2BSandboxStore,
  s: E2BSandbox,
  method: string,
  message: Json,
): Promise<unknown> {
  const svc = service(deps)
  switch (method) {
    case 'List': {
      const running = new Set(
        ((await svc.list(s.tenant, s.sandboxId)) ?? []).filter((p) => p.state === 'running').map((p) => p.id),
      )
      return {
        processes: [...(await trackedOf(store, s))]
          .filter(([, t]) => running.has(t.id))
          .map(([pid, t]) => ({ pid, config: t.config, ...(t.tag ? { tag: t.tag } : {}) })),
      }
    }
    case 'SendInput': {
      const { t } = await selected(store, s, message)
      const stdin = obj(message.input).stdin
      if (typeof stdin !== 'string')
        throw new ConnectRpcError('invalid_argument', 'input.stdin (base64) is required')
      await svc.writeStdin(s.tenant, s.sandboxId, t.id, Buffer.from(stdin, 'base64'), false)
      return {}
    }
    case 'CloseStdin': {
      const { t } = await selected(store, s, message)
      await svc.writeStdin(s.tenant, s.sandboxId, t.id, new Uint8Array(), true)
      return {}
    }
    case 'SendSignal': {
      const { t } = await selected(store, s, message)
      const signal = message.signal === 'SIGNAL_SIGTERM' || message.signal === 15 ? 'SIGTERM' : 'SIGKILL'
      await svc.signal(s.tenant, s.sandboxId, t.id, signal, 0)
      return {}
    }
    default:
      throw new ConnectRpcError(
        'unimplemented',
        `process.Process/${method} is not implemented by sandbox-router`,
      )
  }
}
