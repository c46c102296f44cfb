import type { OutputChunk } from '../schemas.js'

/**
 * The latest live chunk of one attempt, held back until the end of the current turn of the event
 * loop, for the attempt's finish to carry: a short command's output arrives with its exit (one read
 * from the sandbox), and its result is stored within the same turn, so the output goes to Redis in
 * the finish script instead of a chunk script of its own (a round trip and a few commands less per
 * job). A chunk whose finish does not follow at once is sent on the next turn (`setImmediate`), so a
 * long command's output still streams chunk by chunk, at once; a new chunk sends the held one first,
 * and {@link take} hands the held one to the finish, which follows every chunk sent before it on the
 * same connection: chunks keep their order.
 */
export class ChunkHold {
  private held: OutputChunk | undefined
  private immediate: NodeJS.Immediate | undefined

  constructor(private readonly send: (chunk: OutputChunk) => void) {}

  /** Holds `chunk` (sending the one held before it). */
  publish(chunk: OutputChunk): void {
    this.flush()
    this.held = chunk
    this.immediate = setImmediate(() => this.flush())
  }

  /** Sends the held chunk now, if any. */
  flush(): void {
    const chunk = this.take()
    if (chunk) this.send(chunk)
  }

  /** The held chunk, no longer held (the caller sends it): the finish's. */
  take(): OutputChunk | undefined {
    if (this.immediate) clearImmediate(this.immediate)
    this.immediate = undefined
    const chunk = this.held
    this.held = undefined
    return chunk
  }
}
