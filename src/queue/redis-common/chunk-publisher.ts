/**
 * Sends a job's live output chunks to Redis, and keeps the ones Redis could not take: a chunk whose
 * write fails (the command connection is reconnecting after a Redis restart) is tried again, in
 * order with the job's later chunks, instead of being dropped. Dropped silently, such a chunk was
 * missing from the live stream and from the job's output log, with nothing to say so (the result
 * still had it). While nothing fails, chunks go out at once, pipelined on the connection as before
 * (so they stay ahead of the job's result). Bounded: past `maxPendingBytes` of a job's unsent
 * output, its oldest waiting chunks after the first are dropped; a job's chunks are given up
 * `GIVE_UP_MS` after the failures began.
 */
import { setTimeout as sleep } from 'node:timers/promises'
import type { OutputChunk } from '../schemas.js'

/** How long a failed chunk write waits before it is tried again (ms), at most. */
const RETRY_MAX_MS = 1_000
/** A job's waiting chunks are tried for this long after the failures began, then dropped (ms). */
const GIVE_UP_MS = 120_000

interface Waiting {
  seq: number
  chunk: OutputChunk
}

interface JobState {
  seq: number
  inFlight: number
  /** Chunks to send again, by `seq`; non-empty (or draining): new chunks queue behind them. */
  waiting: Waiting[]
  bytes: number
  draining: boolean
}

/** Orders and retries one queue's chunk writes, per job. */
export class ChunkPublisher {
  private readonly jobs = new Map<string, JobState>()

  constructor(
    private readonly send: (jobId: string, chunk: OutputChunk) => Promise<unknown>,
    private readonly maxPendingBytes = 1 << 20,
  ) {}

  /** Sends `chunk` now, or queues it behind the job's waiting ones; returns at once. */
  publish(jobId: string, chunk: OutputChunk): void {
    let st = this.jobs.get(jobId)
    if (!st) this.jobs.set(jobId, (st = { seq: 0, inFlight: 0, waiting: [], bytes: 0, draining: false }))
    const seq = st.seq++
    if (st.draining || st.waiting.length > 0) return this.enqueue(jobId, st, { seq, chunk })
    const state = st
    state.inFlight += 1
    this.send(jobId, chunk).then(
      () => {
        state.inFlight -= 1
        this.forget(jobId, state)
      },
      () => {
        state.inFlight -= 1
        this.enqueue(jobId, state, { seq, chunk })
      },
    )
  }

  /** Whether none of the job's chunks waits to be sent again (a new one would go out at once). */
  inOrder(jobId: string): boolean {
    const st = this.jobs.get(jobId)
    return !st || (!st.draining && st.waiting.length === 0)
  }

  /** Whether no chunk is on its way or waiting (tests, shutdown). */
  get idle(): boolean {
    return this.jobs.size === 0
  }

  private enqueue(jobId: string, st: JobState, w: Waiting): void {
    const at = st.waiting.findIndex((x) => x.seq > w.seq)
    st.waiting.splice(at < 0 ? st.waiting.length : at, 0, w)
    st.bytes += w.chunk.data.length
    while (st.bytes > this.maxPendingBytes && st.waiting.length > 1) {
      const [dropped] = st.waiting.splice(1, 1)
      st.bytes -= dropped?.chunk.data.length ?? 0
    }
    if (!st.draining) void this.drain(jobId, st)
  }

  private async drain(jobId: string, st: JobState): Promise<void> {
    st.draining = true
    const since = Date.now()
    let delayMs = 50
    while (st.waiting.length > 0) {
      const head = st.waiting[0] as Waiting
      try {
        await this.send(jobId, head.chunk)
        delayMs = 50
      } catch {
        if (Date.now() - since < GIVE_UP_MS) {
          await sleep(delayMs)
          delayMs = Math.min(delayMs * 2, RETRY_MAX_MS)
          continue
        }
      }
      st.waiting.shift()
      st.bytes -= head.chunk.data.length
    }
    st.draining = false
    this.forget(jobId, st)
  }

  private forget(jobId: string, st: JobState): void {
    if (st.inFlight === 0 && !st.draining && st.waiting.length === 0 && this.jobs.get(jobId) === st)
      this.jobs.delete(jobId)
  }
}
