/**
 * envd's PTYs (`sandbox.pty.*` of the SDK) over the session terminals of `/v1/sessions/{id}/terminal`
 * ({@link SessionStreamService.openTerminal}): `Start` with `pty` runs the command (the SDK's
 * `/bin/bash -i -l`) on a pseudo-terminal of the given size and streams its bytes as `data.pty`
 * events; `SendInput` types into it, `Update` resizes it, `Connect` attaches another stream by pid,
 * `SendSignal` kills it. The terminal lives in this process, apart from the streams that read it: a
 * stream that ends (the SDK's `disconnect()`) leaves it running, and output no stream reads is
 * dropped, as envd drops it.
 */
import type { SandboxTerminal } from '../../sandbox/types.js'
import { ConnectRpcError, openStream, type ServerStream } from './connect.js'
import type { E2BRouteDeps } from './deps.js'
import {
  commandLineOf,
  configOf,
  deadlineOf,
  endEvent,
  quote,
  timers,
  type ProcessConfig,
  type Tracked,
} from './process-rpc.js'
import type { E2BSandbox, E2BSandboxStore } from './sandboxes.js'

type Json = Record<string, unknown>

/** How long a kill waits for the terminal's processes to be gone before it answers (ms). */
const KILL_WAIT_MS = 10_000
/** How long a slow stream may hold the terminal's output back before it is sent on regardless (ms). */
const READER_WAIT_MS = 30_000

/** One PTY of a sandbox, held by this process. */
interface Pty {
  readonly pid: number
  readonly config: ProcessConfig
  readonly terminal: SandboxTerminal
  /** The streams reading it now (Start's, and each Connect's). */
  readonly readers: Set<ServerStream>
  /** Settles once it ended and was forgotten (here and in the sandbox's process table). */
  finished?: Promise<void>
}

const obj = (v: unknown): Json => (v && typeof v === 'object' && !Array.isArray(v) ? (v as Json) : {})

/** A window dimension of a `PTY.Size`: an integer of 1–65535. */
function dimension(size: Json, name: 'cols' | 'rows'): number {
  const v = size[name]
  if (typeof v === 'number' && Number.isInteger(v) && v >= 1 && v <= 65_535) return v
  throw new ConnectRpcError(
    'invalid_argument',
    `pty.size.${name} ${JSON.stringify(v)} is not a terminal size: give an integer of 1-65535`,
  )
}

/** The `pty.size` of a request. */
function sizeOf(message: Json): { cols: number; rows: number } {
  const size = obj(obj(message.pty).size)
  return { cols: dimension(size, 'cols'), rows: dimension(size, 'rows') }
}

/** The bytes of a `ProcessInput` (`pty`, or `stdin`, which a PTY reads the same way), base64 on the wire. */
function inputOf(message: Json): Buffer {
  const input = obj(message.input)
  const data = typeof input.pty === 'string' ? input.pty : input.stdin
  if (typeof data !== 'string')
    throw new ConnectRpcError('invalid_argument', 'input.pty (base64 bytes) is required')
  return Buffer.from(data, 'base64')
}

/** The E2B PTYs of every sandbox this process started one in. */
export class E2BPtys {
  private readonly bySandbox = new Map<string, Map<number, Pty>>()

  constructor(
    private readonly deps: E2BRouteDeps,
    private readonly store: E2BSandboxStore,
  ) {}

  /** `Start` with `pty`: policy, then the terminal, then its events. */
  async start(s: E2BSandbox, message: Json, headers: Headers): Promise<Response> {
    const config = configOf(message)
    const { cols, rows } = sizeOf(message)
    const streams = this.deps.streams
    if (!streams)
      throw new ConnectRpcError(
        'unimplemented',
        'PTYs need the sandbox’s channel in the process that answers, and this server relays no terminals (`sbx api` without engine routing): use `sbx serve`',
      )
    const line = commandLineOf(config)
    const verdict = await this.deps.e2b.policy(s.tenant, s.sandboxId, line)
    if (verdict.kind === 'block')
      throw new ConnectRpcError('permission_denied', `blocked by policy: ${verdict.reason}`)
    // `exec` keeps the command's pid the terminal's (what kill and `kill -0 <pid>` name); a command
    // the policy rewrote runs as it was rewritten.
    const argv = [config.cmd, ...config.args].map(quote).join(' ')
    const command = verdict.command === line ? `exec ${argv}` : verdict.command
    const { terminal } = await streams.openTerminal(s.tenant, s.sandboxId, {
      cols,
      rows,
      command,
      env: { ...s.envVars, ...config.envs },
      ...(config.cwd ? { cwd: config.cwd } : {}),
    })
    const pty: Pty = { pid: terminal.pid, config, terminal, readers: new Set() }
    const table = this.bySandbox.get(s.sandboxId) ?? new Map<number, Pty>()
    this.bySandbox.set(s.sandboxId, table)
    table.set(pty.pid, pty)
    // In the sandbox's process table too: `List` shows it on every replica, and the others name its holder.
    const tracked: Tracked = { id: `pty-${pty.pid}`, config, pty: true }
    await this.store.setProcess(s.sandboxId, pty.pid, JSON.stringify(tracked)).catch((err: unknown) => {
      terminal.close()
      throw err
    })
    const { response, stream } = openStream()
    stream.send({ start: { pid: pty.pid } })
    timers(headers, stream)
    this.attach(pty, stream)
    pty.finished = this.pump(s, pty).catch(() => undefined)
    // The terminal dies at the call's deadline, as envd's PTY does (the SDK's `timeoutMs`, 60 s by
    // default; 0 sends none), whether or not a stream still reads it.
    const deadline = deadlineOf(headers)
    if (deadline) setTimeout(() => terminal.close(), deadline).unref()
    return response
  }

  /** `Connect` to a PTY of this process: its events from now on; undefined when the pid is no PTY here. */
  connect(s: E2BSandbox, message: Json, headers: Headers): Response | undefined {
    const pty = this.find(s, message)
    if (!pty) return undefined
    const { response, stream } = openStream()
    stream.send({ start: { pid: pty.pid } })
    timers(headers, stream)
    this.attach(pty, stream)
    return response
  }

  /**
   * `SendInput`, `Update`, `SendSignal` and `CloseStdin` of a PTY of this process: the answer, or
   * undefined when the pid is no PTY here (then it is a process's).
   */
  async unary(s: E2BSandbox, method: string, message: Json): Promise<Json | undefined> {
    const pty = this.find(s, message)
    if (!pty) return undefined
    switch (method) {
      case 'SendInput': {
        const bytes = inputOf(message)
        await new Promise<void>((resolve, reject) =>
          pty.terminal.stream.write(bytes, (err) => (err ? reject(err) : resolve())),
        )
        return {}
      }
      case 'Update': {
        const { cols, rows } = sizeOf(message)
        pty.terminal.resize(cols, rows)
        return {}
      }
      case 'SendSignal': {
        // Any signal ends the terminal's processes (its whole session), as closing it does; the
        // answer waits until they are gone and the pid forgotten, so the pid is free when the caller looks.
        pty.terminal.close()
        await Promise.race([pty.finished, new Promise((r) => setTimeout(r, KILL_WAIT_MS).unref())])
        return {}
      }
      case 'CloseStdin':
        throw new ConnectRpcError(
          'failed_precondition',
          `process ${pty.pid} is a PTY, which has no stdin to close: send Ctrl+D (input 0x04) to end its input`,
        )
      default:
        return undefined
    }
  }

  private find(s: E2BSandbox, message: Json): Pty | undefined {
    const pid = obj(message.process).pid
    return typeof pid === 'number' ? this.bySandbox.get(s.sandboxId)?.get(pid) : undefined
  }

  /** Removes an ended PTY's entry from the sandbox's process table (unless its pid is another's by now). */
  private async forget(s: E2BSandbox, pid: number): Promise<void> {
    const entry = (await this.store.processes(s.sandboxId)).get(pid)
    if (entry && (JSON.parse(entry) as Tracked).id === `pty-${pid}`)
      await this.store.deleteProcess(s.sandboxId, pid)
  }

  /** Adds a reader until its stream ends. */
  private attach(pty: Pty, stream: ServerStream): void {
    pty.readers.add(stream)
    stream.signal.addEventListener('abort', () => pty.readers.delete(stream), { once: true })
  }

  /**
   * Sends the terminal's output to its readers, no faster than the slowest takes it (the terminal
   * pauses meanwhile, as the shell then waits on a full pty), and its end once every byte went out.
   */
  private pump(s: E2BSandbox, pty: Pty): Promise<void> {
    const out = pty.terminal.stream
    out.on('data', (chunk: Buffer) => {
      const event = { data: { pty: chunk.toString('base64') } }
      for (const r of pty.readers) r.send(event)
      if (!pty.readers.size) return
      out.pause()
      void Promise.all([...pty.readers].map((r) => r.ready(READER_WAIT_MS))).then(() => out.resume())
    })
    out.on('error', () => undefined)
    return pty.terminal.exited.then(async (exit) => {
      if (!out.readableEnded && !out.destroyed)
        await new Promise<void>((resolve) => {
          out.once('end', resolve)
          out.once('close', resolve)
          out.resume()
        })
      const table = this.bySandbox.get(s.sandboxId)
      table?.delete(pty.pid)
      if (table && !table.size) this.bySandbox.delete(s.sandboxId)
      await this.forget(s, pty.pid).catch(() => undefined)
      // A killed sandbox drops its streams, as E2B's does (the SDK then reports the sandbox gone).
      const gone = await this.store.gone(s.sandboxId).catch(() => false)
      const end = endEvent({
        exitCode: exit.exitCode,
        // Closed here (a kill, the deadline) rather than ended by itself: envd reports the SIGKILL.
        signal: exit.signal ?? (exit.exitCode === null ? 'SIGKILL' : null),
      })
      for (const r of pty.readers) {
        if (gone) r.drop()
        else {
          r.send(end)
          r.end()
        }
      }
    })
  }
}
