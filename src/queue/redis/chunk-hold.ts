import type { OutputChunk } from '../schemas.js'

/**
 * How long a job's latest live chunk is held back at most for the job's finish to carry it (ms). A
 * short command's output reaches the worker in the same read as its exit or within about a
 * millisecond of it (a read or two later), and its result is stored right after: held this long,
 * its output goes to Redis in the finish script instead of a chunk script of its own (a round trip
 * and 6 commands less per job, docs/redis-path.md).
 */
export const CHUNK_HOLD_MS = 2

/**
 * The latest live chunk of one attempt, held back for at most {@link CHUNK_HOLD_MS} for the attempt's
 * finish to carry. A long command's output still streams chunk by chunk: a new chunk sends the held
 * one at once, so only the last chunk of a burst waits, and at most that long. Chunks keep their
 * order: {@link take} hands the held chunk to the finish, which follows every chunk sent before it on
 * the same connection.
 */
export class ChunkHold {
  private held: OutputChunk | undefined
  private timer: NodeJS.Timeout | undefined

  constructor(
    private readonly send: (chunk: OutputChunk) => void,
    private readonly holdMs: number = CHUNK_HOLD_MS,
  ) {}

  /** Holds `chunk` (sending the one held before it). */
  publish(chunk: OutputChunk): void {
    this.flush()
    this.held = chunk
    this.timer = setTimeout(() => this.flush(), this.holdMs)
  }

  /** Sends the held chunk now, if any. */
  flush(): void {
    const chunk = this.take()
    if (chunk) this.send(chunk)
  }

  /** The held chunk, no longer held (the caller sends it): the finish's. */
  take(): OutputChunk | undefined {
    clearTimeout(this.timer)
    this.timer = undefined
    const chunk = this.held
    this.held = undefined
    return chunk
  }
}
