/*
 * Child processes of the Redis fault tests: the worker fixture (JSON lines on stdout) and the real
 * `sbx` CLI (text on stderr, pino JSON logs on stdout). Tests wait on their lines, never on sleeps.
 */
import { spawn } from 'node:child_process'
import type { ChildProcess } from 'node:child_process'
import { EventEmitter, once } from 'node:events'
import { fileURLToPath } from 'node:url'
import { createInterface } from 'node:readline'

/** The repository root. */
export const ROOT = fileURLToPath(new URL('../../', import.meta.url))
/** The `sbx` entry point (runs the TypeScript sources through tsx when there is no build). */
export const SBX = fileURLToPath(new URL('../../bin/sbx.js', import.meta.url))
const WORKER_FIXTURE = fileURLToPath(new URL('./worker-process.ts', import.meta.url))

/** Children still running: killed if this process exits without stopping them (a timed-out test). */
const running = new Set<ChildProcess>()
process.once('exit', () => {
  for (const child of running) child.kill('SIGKILL')
})

/** One output line of a child: parsed JSON when it was JSON. */
export interface ChildLine {
  readonly stream: 'stdout' | 'stderr'
  readonly text: string
  readonly json?: Record<string, unknown>
  /** performance.now() when the line arrived. */
  readonly at: number
}

/** A child process whose output lines can be awaited. */
export class LineChild {
  readonly lines: ChildLine[] = []
  private readonly events = new EventEmitter()
  /** Resolves with [exit code, signal] when the process ends. */
  readonly exited: Promise<[number | null, NodeJS.Signals | null]>

  constructor(
    readonly name: string,
    readonly child: ChildProcess,
  ) {
    this.events.setMaxListeners(0)
    running.add(child)
    this.exited = once(child, 'exit') as Promise<[number | null, NodeJS.Signals | null]>
    void this.exited.then(() => running.delete(child))
    for (const stream of ['stdout', 'stderr'] as const) {
      const input = child[stream]
      if (!input) continue
      createInterface({ input }).on('line', (text) => {
        let json: Record<string, unknown> | undefined
        if (text.startsWith('{')) {
          try {
            json = JSON.parse(text) as Record<string, unknown>
          } catch {
            json = undefined
          }
        }
        const line: ChildLine = { stream, text, ...(json ? { json } : {}), at: performance.now() }
        this.lines.push(line)
        this.events.emit('line', line)
      })
    }
  }

  /** Spawns `node <args>` with `env` added to this process's environment, in `cwd` (default: the repository). */
  static spawn(
    name: string,
    args: readonly string[],
    env: Record<string, string> = {},
    cwd: string = ROOT,
  ): LineChild {
    const child = spawn(process.execPath, [...args], {
      cwd,
      env: { ...process.env, LOG_LEVEL: 'info', NO_COLOR: '1', ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    })
    return new LineChild(name, child)
  }

  /** Resolves with the first line (seen or future) that matches; rejects when the process exits first or on timeout. */
  next(match: (l: ChildLine) => boolean, timeoutMs = 60_000, from = 0): Promise<ChildLine> {
    const seen = this.lines.slice(from).find(match)
    if (seen) return Promise.resolve(seen)
    return new Promise((resolve, reject) => {
      const cleanup = (): void => {
        clearTimeout(timer)
        this.events.off('line', on)
        this.child.off('exit', onExit)
      }
      const on = (l: ChildLine): void => {
        if (!match(l)) return
        cleanup()
        resolve(l)
      }
      const onExit = (code: number | null, signal: NodeJS.Signals | null): void => {
        cleanup()
        reject(new Error(`${this.name} exited (${signal ?? code}) before the awaited line:\n${this.tail()}`))
      }
      const timer = setTimeout(() => {
        cleanup()
        reject(new Error(`${this.name}: no awaited line within ${timeoutMs} ms:\n${this.tail()}`))
      }, timeoutMs)
      this.events.on('line', on)
      this.child.once('exit', onExit)
    })
  }

  /** Calls `listener` with every line from now on (returns a function that stops it). */
  onLine(listener: (l: ChildLine) => void): () => void {
    this.events.on('line', listener)
    return () => this.events.off('line', listener)
  }

  /** Lines carrying a JSON `event` field equal to `event`. */
  jsonEvents(event: string): ChildLine[] {
    return this.lines.filter((l) => l.json?.['event'] === event)
  }

  /** The last output lines, for failure messages. */
  tail(n = 30): string {
    return this.lines
      .slice(-n)
      .map((l) => `[${this.name} ${l.stream}] ${l.text}`)
      .join('\n')
  }

  get alive(): boolean {
    return this.child.exitCode === null && this.child.signalCode === null
  }

  get pid(): number | undefined {
    return this.child.pid
  }

  /** SIGTERM, then SIGKILL when it has not exited within `graceMs`. */
  async stop(graceMs = 20_000): Promise<void> {
    if (!this.alive) return
    this.child.kill('SIGTERM')
    const timer = setTimeout(() => this.child.kill('SIGKILL'), graceMs)
    await this.exited
    clearTimeout(timer)
  }

  /** SIGKILL. */
  async kill(): Promise<void> {
    if (!this.alive) return
    this.child.kill('SIGKILL')
    await this.exited
  }
}

/** Names that keep one test's Redis keys and containers apart. */
export interface FaultNames {
  readonly scope: string
  readonly queuePrefix: string
  readonly sessionPrefix: string
}

/** Starts the worker fixture on `redisUrl` and resolves once it is consuming. */
export async function startWorkerProcess(
  redisUrl: string,
  names: FaultNames,
  workerId: string,
  env: Record<string, string> = {},
): Promise<LineChild> {
  const w = LineChild.spawn(`worker ${workerId}`, ['--import', 'tsx', WORKER_FIXTURE], {
    REDIS_URL: redisUrl,
    SBX_SCOPE: names.scope,
    SBX_QUEUE_PREFIX: names.queuePrefix,
    SBX_SESSION_PREFIX: names.sessionPrefix,
    SBX_WORKER_ID: workerId,
    ...env,
  })
  await w.next((l) => l.json?.['event'] === 'ready', 120_000)
  return w
}
