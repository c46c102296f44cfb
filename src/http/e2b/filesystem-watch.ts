/**
 * envd's `filesystem.Filesystem/WatchDir` (`files.watchDir`): a stream of the directory's events,
 * from inotify in the sandbox. The watch is a background process of the session running the agent's
 * `--proc-fs-watch` (providers/docker/agent/fsops.c), which prints one JSON line per event; this
 * stream reads them (no faster than the client takes them: the process is held back by the agent's
 * backpressure) and ends the process when the stream ends (`handle.stop()`, the call's deadline, the
 * client gone). A missing directory is `not_found` (the SDK's FileNotFoundError), a file
 * `invalid_argument`; a sandbox whose agent predates watches answers `unimplemented`. The
 * non-streaming watcher RPCs (`CreateWatcher`, …), which the SDK does not call, are not served.
 */
import { posix } from 'node:path'
import { ConnectRpcError, openStream, type ServerStream } from './connect.js'
import type { ProcessService } from '../deps.js'
import type { E2BRouteDeps } from './deps.js'
import { unaryFilesystem } from './filesystem-rpc.js'
import { lossOf } from './output-loss.js'
import { connectErrorOf, timers } from './process-rpc.js'
import { AGENT, agentFailure, agentLacksMode, agentTooOld } from './sandbox-helper.js'
import type { E2BSandbox } from './sandboxes.js'

type Json = Record<string, unknown>

/** The longest one read of the watch's output waits for an event. */
const READ_WAIT_MS = 5_000

const EVENT_TYPES: Record<string, string> = {
  create: 'EVENT_TYPE_CREATE',
  write: 'EVENT_TYPE_WRITE',
  remove: 'EVENT_TYPE_REMOVE',
  rename: 'EVENT_TYPE_RENAME',
  chmod: 'EVENT_TYPE_CHMOD',
}

/** Reads a process's stdout as lines, from byte 0 on. */
class LineReader {
  private offset = 0
  private rest = ''
  /** Lines read ahead of the caller (after the watch's first line). */
  pending: string[] = []
  constructor(
    private readonly svc: ProcessService,
    private readonly s: E2BSandbox,
    private readonly id: string,
    private readonly pid: number,
  ) {}

  /** Reads nothing, but tells the sandbox a reader is still there (so the watch stays held back, not dropped). */
  async touch(): Promise<void> {
    await this.svc.read(this.s.tenant, this.s.sandboxId, this.id, {
      stdoutOffset: this.offset,
      stderrOffset: 0,
      maxBytes: 0,
    })
  }

  /** The next complete lines (maybe none after a quiet wait); `ended` once the process is done and read. */
  async next(): Promise<{ lines: string[]; ended: boolean; stderr: string }> {
    if (this.pending.length) return { lines: this.pending.splice(0), ended: false, stderr: '' }
    const out = await this.svc.read(this.s.tenant, this.s.sandboxId, this.id, {
      stdoutOffset: this.offset,
      stderrOffset: 0,
      maxBytes: 65_536,
      waitMs: READ_WAIT_MS,
    })
    if (!out) throw new ConnectRpcError('not_found', `sandbox ${this.s.sandboxId} is gone`)
    const loss = lossOf({ ...out, stderr: { ...out.stderr, dropped: 0 } }, this.pid)
    if (loss) throw loss
    this.offset = out.stdout.nextOffset
    const parts = (this.rest + out.stdout.data).split('\n')
    this.rest = parts.pop() ?? ''
    const p = out.process
    return {
      lines: parts,
      ended: p.state !== 'running' && this.offset >= p.stdoutBytes,
      stderr: out.stderr.data,
    }
  }
}

/** The event of one `--proc-fs-watch` line (undefined for a line that is none). */
async function eventOf(
  deps: E2BRouteDeps,
  s: E2BSandbox,
  root: string,
  line: string,
  includeEntry: boolean,
): Promise<Json | undefined> {
  let e: { name?: unknown; type?: unknown }
  try {
    e = JSON.parse(line) as typeof e
  } catch {
    return undefined
  }
  const type = typeof e.type === 'string' ? EVENT_TYPES[e.type] : undefined
  if (typeof e.name !== 'string' || !type) return undefined
  const event: Json = { name: e.name, type }
  // Best effort, as envd: no entry for a path gone by now (a remove, a rename away).
  if (includeEntry) {
    const info = (await unaryFilesystem(deps, s, 'Stat', { path: posix.join(root, e.name) }).catch(
      () => undefined,
    )) as { entry?: Json } | undefined
    if (info?.entry) event.entry = info.entry
  }
  return { filesystem: event }
}

/** Sends the watch's events until it or the stream ends; the process is removed at the end. */
async function pump(
  deps: E2BRouteDeps,
  s: E2BSandbox,
  reader: LineReader,
  root: string,
  includeEntry: boolean,
  stream: ServerStream,
): Promise<void> {
  while (!stream.ended) {
    // The client is behind: wait for it (the watch's output waits in the sandbox).
    while (!(await stream.ready(READ_WAIT_MS)) && !stream.ended) await reader.touch()
    if (stream.ended) return
    const { lines, ended } = await reader.next()
    for (const line of lines) {
      const event = await eventOf(deps, s, root, line, includeEntry)
      if (event) stream.send(event)
    }
    // The watched directory went away (removed or moved): the watch is over.
    if (ended) return stream.end()
  }
}

/** `WatchDir`: starts the watch, answers with its start event once inotify watches, then its events. */
export async function watchDir(
  deps: E2BRouteDeps,
  s: E2BSandbox,
  message: Json,
  headers: Headers,
): Promise<Response> {
  const svc = deps.processes
  if (!svc) throw new ConnectRpcError('unimplemented', 'this server has no sandbox processes')
  const path = message.path
  if (typeof path !== 'string' || !path) throw new ConnectRpcError('invalid_argument', 'path is required')
  const recursive = message.recursive === true
  const includeEntry = message.includeEntry === true
  const info = await svc.start(s.tenant, s.sandboxId, {
    command: `exec ${AGENT} --proc-fs-watch '${path.replace(/'/g, `'\\''`)}' ${recursive ? 1 : 0}`,
    backpressure: true,
  })
  if (!info) throw new ConnectRpcError('not_found', `sandbox ${s.sandboxId} is gone`)
  const remove = (): void => void svc.remove(s.tenant, s.sandboxId, info.id).catch(() => undefined)
  const reader = new LineReader(svc, s, info.id, info.pid)
  try {
    // Its first line says whether it watches (`{"start":true}`) or why not.
    for (;;) {
      const { lines, ended, stderr } = await reader.next()
      const first = lines[0]
      if (first !== undefined) {
        const f = agentFailure(first)
        if (f && agentLacksMode(f)) throw agentTooOld('files.watchDir')
        if (f?.error === 'NOT_FOUND') throw new ConnectRpcError('not_found', f.message)
        if (f) throw new ConnectRpcError('invalid_argument', f.message)
        if (first !== '{"start":true}')
          throw new ConnectRpcError('internal', `unexpected watch output: ${first}`)
        reader.pending = lines.slice(1)
        break
      }
      if (ended)
        throw new ConnectRpcError(
          'internal',
          `the watch of ${path} ended at once: ${stderr.trim() || 'no output'}`,
        )
    }
  } catch (err) {
    remove()
    throw err
  }
  const { response, stream } = openStream({ inline: true })
  stream.signal.addEventListener('abort', remove, { once: true })
  stream.send({ start: {} })
  timers(headers, stream)
  void pump(deps, s, reader, posix.resolve(s.cwd, path), includeEntry, stream).catch((err: unknown) => {
    const e = connectErrorOf(err)
    stream.end({ code: e.code, message: e.message })
  })
  return response
}
