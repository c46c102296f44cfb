import { spawn } from 'node:child_process'
import type { ChildProcess } from 'node:child_process'
import { EventEmitter, once } from 'node:events'
import { createInterface } from 'node:readline'
import { fileURLToPath } from 'node:url'
import { REDIS_URL } from './redis.js'
import type { WorldNames } from './queue-world.js'

const FIXTURE = fileURLToPath(new URL('./worker-process.ts', import.meta.url))
/** A bare queue consumer with the scripted processor (no sandbox), for {@link WorkerChild.start}. */
export const CONSUMER_FIXTURE = fileURLToPath(new URL('./queue-consumer-process.ts', import.meta.url))

/** One line the worker child reported. */
export interface WorkerLine {
  readonly event: string
  readonly jobId?: string
  readonly attempt?: number
  readonly workerId?: string
}

/** A fleet worker running in its own process. */
export class WorkerChild {
  readonly lines: WorkerLine[] = []
  private readonly events = new EventEmitter()
  readonly exited: Promise<unknown>

  private constructor(
    readonly workerId: string,
    readonly child: ChildProcess,
  ) {
    this.exited = once(child, 'exit')
    const rl = createInterface({ input: child.stdout as NodeJS.ReadableStream })
    rl.on('line', (text) => {
      let line: WorkerLine
      try {
        line = JSON.parse(text) as WorkerLine
      } catch {
        return
      }
      this.lines.push(line)
      this.events.emit('line', line)
    })
  }

  /**
   * Spawns a worker with tsx and resolves once it is consuming: the exec worker of
   * worker-process.ts, or another `fixture` that reports the same lines ({@link CONSUMER_FIXTURE}).
   */
  static async start(
    names: Pick<WorldNames, 'scope' | 'queuePrefix' | 'sessionPrefix'>,
    workerId: string,
    env: Record<string, string> = {},
    fixture: string = FIXTURE,
  ): Promise<WorkerChild> {
    const child = spawn(process.execPath, ['--import', 'tsx', fixture], {
      env: {
        ...process.env,
        REDIS_URL,
        SBX_SCOPE: names.scope,
        SBX_QUEUE_PREFIX: names.queuePrefix,
        SBX_SESSION_PREFIX: names.sessionPrefix,
        SBX_WORKER_ID: workerId,
        ...env,
      },
      stdio: ['ignore', 'pipe', 'inherit'],
    })
    const w = new WorkerChild(workerId, child)
    await Promise.race([
      w.next((l) => l.event === 'ready'),
      w.exited.then(() => Promise.reject(new Error(`worker ${workerId} exited before it was ready`))),
    ])
    return w
  }

  /** Resolves with the first line (already seen or future) that matches. */
  async next(match: (l: WorkerLine) => boolean): Promise<WorkerLine> {
    const seen = this.lines.find(match)
    if (seen) return seen
    return new Promise((resolve) => {
      const on = (l: WorkerLine): void => {
        if (!match(l)) return
        this.events.off('line', on)
        resolve(l)
      }
      this.events.on('line', on)
    })
  }

  /** Whether this worker started the job (any attempt). */
  ran(jobId: string): boolean {
    return this.lines.some((l) => l.event === 'start' && l.jobId === jobId)
  }

  get alive(): boolean {
    return this.child.exitCode === null && this.child.signalCode === null
  }

  /** SIGKILL: the worker dies mid-whatever, as a crashed machine would. */
  async kill(): Promise<void> {
    if (!this.alive) return
    this.child.kill('SIGKILL')
    await this.exited
  }

  /** SIGTERM: graceful shutdown. */
  async stop(): Promise<void> {
    if (!this.alive) return
    this.child.kill('SIGTERM')
    await this.exited
  }
}
