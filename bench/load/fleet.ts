import { spawn } from 'node:child_process'
import type { ChildProcess } from 'node:child_process'
import { randomUUID } from 'node:crypto'
import { EventEmitter, once } from 'node:events'
import { createInterface } from 'node:readline'
import { fileURLToPath } from 'node:url'
import type { Redis } from 'ioredis'

const WORKER = fileURLToPath(new URL('./worker.ts', import.meta.url))

/** Names that keep one run's Redis keys and containers apart from everything else on this machine. */
export interface RunNames {
  readonly scope: string
  readonly queuePrefix: string
  readonly sessionPrefix: string
}

/** Fresh names for one run. */
export function runNames(): RunNames {
  const id = randomUUID().slice(0, 8)
  return { scope: `load-${id}`, queuePrefix: `sbxload-q-${id}`, sessionPrefix: `sbxload-s-${id}:` }
}

/** Key patterns of a run (queue, fences, session store). */
export const keyPatterns = (n: RunNames): string[] => [`${n.queuePrefix}:*`, `${n.sessionPrefix}*`]

/** Pool counters a worker reports. */
export interface PoolFigures {
  readonly acquires: number
  readonly hits: number
  readonly misses: number
  readonly creates: number
}

/** One line a worker printed. */
export interface WorkerLine {
  readonly event: 'ready' | 'start' | 'end' | 'dying' | 'closed'
  readonly jobId?: string
  readonly attempt?: number
  readonly status?: string
  readonly pool?: PoolFigures
  /** Date.now() in the worker (`dying`). */
  readonly wall?: number
  /** performance.now() in the bench process when the line arrived. */
  readonly at: number
}

/** A fleet worker in its own process. */
export class WorkerProc {
  readonly lines: WorkerLine[] = []
  /** Jobs started here and not ended yet. */
  readonly inFlight = new Set<string>()
  /** Last pool counters this worker reported. */
  pool: PoolFigures = { acquires: 0, hits: 0, misses: 0, creates: 0 }
  readonly exited: Promise<unknown>
  /** When it SIGKILLed itself (performance.now() of this process), from its `dying` line. */
  diedAt: number | undefined
  private readonly events = new EventEmitter()

  private constructor(
    readonly workerId: string,
    readonly child: ChildProcess,
  ) {
    this.exited = once(child, 'exit')
    const rl = createInterface({ input: child.stdout as NodeJS.ReadableStream })
    rl.on('line', (text) => {
      let parsed: Omit<WorkerLine, 'at'>
      try {
        parsed = JSON.parse(text) as Omit<WorkerLine, 'at'>
      } catch {
        return
      }
      const line: WorkerLine = { ...parsed, at: performance.now() }
      this.lines.push(line)
      if (line.event === 'start' && line.jobId) this.inFlight.add(line.jobId)
      if (line.event === 'end' && line.jobId) this.inFlight.delete(line.jobId)
      if (line.pool) this.pool = line.pool
      if (line.event === 'dying' && line.wall !== undefined)
        this.diedAt = performance.now() - (Date.now() - line.wall)
      this.events.emit('line', line)
    })
  }

  /** Spawns a worker with tsx and resolves once it is consuming. */
  static async start(
    names: RunNames,
    workerId: string,
    env: Record<string, string>,
    readyTimeoutMs = 60_000,
  ): Promise<WorkerProc> {
    const child = spawn(process.execPath, ['--import', 'tsx', WORKER], {
      env: {
        ...process.env,
        SBX_SCOPE: names.scope,
        SBX_QUEUE_PREFIX: names.queuePrefix,
        SBX_SESSION_PREFIX: names.sessionPrefix,
        SBX_WORKER_ID: workerId,
        ...env,
      },
      stdio: ['ignore', 'pipe', 'inherit'],
    })
    const w = new WorkerProc(workerId, child)
    let timer: NodeJS.Timeout | undefined
    try {
      await Promise.race([
        w.next((l) => l.event === 'ready'),
        w.exited.then(() => Promise.reject(new Error(`worker ${workerId} exited before it was ready`))),
        new Promise((_, reject) => {
          timer = setTimeout(
            () => reject(new Error(`worker ${workerId} not ready after ${readyTimeoutMs} ms`)),
            readyTimeoutMs,
          )
        }),
      ])
    } catch (err) {
      await w.kill()
      throw err
    } finally {
      clearTimeout(timer)
    }
    return w
  }

  /** Resolves with the first line (already seen or future) that matches. */
  next(match: (l: WorkerLine) => boolean): Promise<WorkerLine> {
    const seen = this.lines.find(match)
    if (seen) return Promise.resolve(seen)
    return new Promise((resolve) => {
      const on = (l: WorkerLine): void => {
        if (!match(l)) return
        this.events.off('line', on)
        resolve(l)
      }
      this.events.on('line', on)
    })
  }

  /** Attempts this worker started, per job. */
  starts(): Map<string, number[]> {
    const m = new Map<string, number[]>()
    for (const l of this.lines) {
      if (l.event !== 'start' || !l.jobId) continue
      const list = m.get(l.jobId) ?? []
      list.push(l.attempt ?? 1)
      m.set(l.jobId, list)
    }
    return m
  }

  get alive(): boolean {
    return this.child.exitCode === null && this.child.signalCode === null
  }

  /**
   * Arms a crash (SIGUSR1): the worker SIGKILLs itself a few ms into the next job it starts, and
   * prints when. Resolves with the time of death (performance.now() of this process), or after
   * `fallbackMs` SIGKILLs it from here (no job started there meanwhile).
   */
  async crashMidJob(fallbackMs = 2_000): Promise<number> {
    if (!this.alive) throw new Error(`worker ${this.workerId} is not running`)
    this.child.kill('SIGUSR1')
    let timer: NodeJS.Timeout | undefined
    const fallback = new Promise<'fallback'>((resolve) => {
      timer = setTimeout(() => resolve('fallback'), fallbackMs)
    })
    const r = await Promise.race([this.exited, fallback])
    clearTimeout(timer)
    if (r === 'fallback') {
      const at = performance.now()
      await this.kill()
      return at
    }
    // The `dying` line was written before the signal (a synchronous pipe write); give readline a turn.
    await new Promise((resolve) => setImmediate(resolve))
    return this.diedAt ?? performance.now()
  }

  /** SIGKILL: the worker dies mid-whatever, as a crashed machine would. */
  async kill(): Promise<void> {
    if (!this.alive) return
    this.child.kill('SIGKILL')
    await this.exited
  }

  /** SIGTERM (graceful), then SIGKILL if it has not exited after `graceMs`. */
  async stop(graceMs = 15_000): Promise<void> {
    if (!this.alive) return
    this.child.kill('SIGTERM')
    let timer: NodeJS.Timeout | undefined
    const late = new Promise<'late'>((resolve) => {
      timer = setTimeout(() => resolve('late'), graceMs)
    })
    const r = await Promise.race([this.exited, late])
    clearTimeout(timer)
    if (r === 'late') await this.kill()
  }
}

/** Keys matching `pattern`. */
export async function scanKeys(redis: Redis, pattern: string): Promise<string[]> {
  const out: string[] = []
  let cursor = '0'
  do {
    const [next, keys] = await redis.scan(cursor, 'MATCH', pattern, 'COUNT', 1000)
    cursor = next
    out.push(...keys)
  } while (cursor !== '0')
  return out
}

/** Number of keys and the bytes `MEMORY USAGE` reports for them, over the run's patterns. */
export async function prefixMemory(redis: Redis, names: RunNames): Promise<{ keys: number; bytes: number }> {
  let keys = 0
  let bytes = 0
  for (const pattern of keyPatterns(names)) {
    const found = await scanKeys(redis, pattern)
    keys += found.length
    for (let i = 0; i < found.length; i += 500) {
      const pipe = redis.pipeline()
      for (const k of found.slice(i, i + 500)) pipe.memory('USAGE', k)
      for (const [err, v] of (await pipe.exec()) ?? []) if (!err && typeof v === 'number') bytes += v
    }
  }
  return { keys, bytes }
}

/** Deletes every key of the run; resolves with how many there were. */
export async function deleteRunKeys(redis: Redis, names: RunNames): Promise<number> {
  let n = 0
  for (const pattern of keyPatterns(names)) {
    const found = await scanKeys(redis, pattern)
    for (let i = 0; i < found.length; i += 500) n += await redis.del(...found.slice(i, i + 500))
  }
  return n
}

/** `used_memory` of INFO memory (bytes). */
export async function usedMemory(redis: Redis): Promise<number> {
  const info = await redis.info('memory')
  const m = /^used_memory:(\d+)/m.exec(info)
  return m?.[1] ? Number(m[1]) : NaN
}

/** Samples `used_memory` every `everyMs` until stopped; resolves with the highest value seen. */
export function sampleUsedMemory(redis: Redis, everyMs = 250): { stop(): Promise<number> } {
  let peak = 0
  let stopped = false
  const loop = (async () => {
    while (!stopped) {
      const v = await usedMemory(redis).catch(() => NaN)
      if (v > peak) peak = v
      await new Promise((r) => setTimeout(r, everyMs))
    }
  })()
  return {
    async stop() {
      stopped = true
      await loop
      return peak
    },
  }
}
