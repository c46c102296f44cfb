import { EventEmitter, once } from 'node:events'
import { AppError } from '../../src/errors.js'
import { resultOfOutcome } from '../../src/queue/index.js'
import type { ExecJobResult, JobProcessor } from '../../src/queue/index.js'

/** A completed exec result with `stdout`, as a test processor returns it from attempt `ctx`. */
export function completedResult(ctx: { attempt: number; workerId: string }, stdout: string): ExecJobResult {
  return {
    status: 'completed',
    result: {
      exitCode: 0,
      stdout,
      stderr: '',
      timedOut: false,
      truncated: false,
      durationMs: 1,
      sandboxId: 'sb-test',
    },
    attempt: ctx.attempt,
    workerId: ctx.workerId,
  }
}

/**
 * A processor driven by the job's command, for exercising queue semantics without a sandbox:
 *   `echo <text>`  completes with stdout `<text>\n`
 *   `block`        publishes `started`, then waits for `release(jobId)` or its signal
 *   `fail-app`     throws AppError('SANDBOX_LOST');  `fail` throws a plain Error
 * Like the exec worker, it passes the fence right before its "side effect".
 */
export class ScriptedProcessor {
  readonly events = new EventEmitter()
  /** Job ids in the order the processor was called (once per delivery). */
  readonly calls: string[] = []
  /** Job ids whose side effect ran (once per run). */
  readonly runs: string[] = []
  running = 0
  maxRunning = 0
  private readonly gates = new Map<string, () => void>()

  readonly process: JobProcessor = async (job, ctx) => {
    this.calls.push(job.jobId)
    const early = resultOfOutcome(await ctx.fence.begin({ sandboxId: 'sb-test' }))
    if (early) return early
    this.runs.push(job.jobId)
    this.running += 1
    this.maxRunning = Math.max(this.maxRunning, this.running)
    try {
      ctx.publish({ stream: 'stdout', data: 'started\n' })
      this.events.emit('started', job.jobId)
      const [verb, ...rest] = job.command.split(' ')
      switch (verb) {
        case 'block':
          await new Promise<void>((resolve, reject) => {
            this.gates.set(job.jobId, resolve)
            ctx.signal.addEventListener('abort', () => reject(new Error('aborted')), { once: true })
          })
          break
        case 'fail-app':
          throw new AppError('SANDBOX_LOST', 'The sandbox vanished; the next call rebinds.')
        case 'fail':
          throw new Error('boom')
        case undefined:
        default:
          break
      }
      return completedResult(ctx, verb === 'echo' ? `${rest.join(' ')}\n` : 'done\n')
    } finally {
      this.running -= 1
      this.gates.delete(job.jobId)
    }
  }

  /** Resolves when the job's side effect has started (now or later). */
  async started(jobId: string): Promise<void> {
    while (!this.runs.includes(jobId)) await once(this.events, 'started')
  }

  /** Resolves when `n` side effects are running at once. */
  async runningAtLeast(n: number): Promise<void> {
    while (this.running < n) await once(this.events, 'started')
  }

  /** Lets a `block` job finish. */
  release(jobId: string): void {
    this.gates.get(jobId)?.()
  }
}
