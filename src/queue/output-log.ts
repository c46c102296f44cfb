import type { LoggedChunk, OutputChunk } from './schemas.js'

/*
 * A job's live output, numbered so a reader can resume. Every chunk a job publishes gets `offset`:
 * the job's output bytes (UTF-8, stdout and stderr together, in publication order) up to and
 * including it. The last `capBytes` of it are retained (oldest dropped), while the job runs and for
 * OUTPUT_LOG_LINGER_MS after it finished. A reader that has seen up to offset N gets the retained
 * chunks past N, then live ones, each once; what the retained log no longer holds is reported as a
 * gap of so many bytes.
 */

/** Live output retained per job for resuming readers (bytes). */
export const OUTPUT_LOG_CAP_BYTES = 1024 * 1024

/** How long a finished job's retained live output stays (ms). */
export const OUTPUT_LOG_LINGER_MS = 60_000

/** The bytes a chunk adds to its job's offset. */
export function chunkBytes(data: string): number {
  return Buffer.byteLength(data, 'utf8')
}

/** The retained live output of one job, in memory (the embedded queue). */
export class OutputLog {
  private readonly chunks: LoggedChunk[] = []
  private bytes = 0
  private total = 0

  constructor(private readonly capBytes: number = OUTPUT_LOG_CAP_BYTES) {}

  /** Numbers a chunk, retains it (dropping the oldest past the cap) and returns it. */
  append(chunk: OutputChunk): LoggedChunk {
    const n = chunkBytes(chunk.data)
    this.total += n
    const logged: LoggedChunk = { stream: chunk.stream, data: chunk.data, offset: this.total }
    this.chunks.push(logged)
    this.bytes += n
    while (this.bytes > this.capBytes && this.chunks.length > 0) {
      const old = this.chunks.shift()
      if (old) this.bytes -= chunkBytes(old.data)
    }
    return logged
  }

  /** The retained chunks, oldest first. */
  retained(): LoggedChunk[] {
    return [...this.chunks]
  }
}

/** The Redis pub/sub and log form of a numbered chunk: `o<offset>\n<data>` (stdout) or `e…` (stderr). */
export function parseLoggedMessage(message: string): LoggedChunk | undefined {
  const kind = message[0]
  if (kind !== 'o' && kind !== 'e') return undefined
  const nl = message.indexOf('\n')
  const offset = Number(message.slice(1, nl))
  if (nl < 0 || !Number.isSafeInteger(offset)) return undefined
  return { stream: kind === 'o' ? 'stdout' : 'stderr', data: message.slice(nl + 1), offset }
}

/** What a resuming reader is given, in order. */
export type OutputDelivery =
  | { readonly kind: 'chunk'; readonly chunk: LoggedChunk }
  /** Bytes between the reader's position and `offset - bytes` were no longer retained. */
  | { readonly kind: 'missed'; readonly bytes: number; readonly offset: number }

/**
 * A reader's position in a job's output: delivers each chunk past it once, in order, and reports
 * a gap (bytes the retained log no longer held) before the first chunk after it.
 */
export class OutputCursor {
  constructor(
    private position: number,
    private readonly deliver: (d: OutputDelivery) => void,
  ) {}

  /** Offset of the last byte delivered (or skipped as missed). */
  get offset(): number {
    return this.position
  }

  /** Feeds one chunk (duplicates and chunks at or before the position are ignored). */
  push(chunk: LoggedChunk): void {
    if (chunk.offset <= this.position) return
    const start = chunk.offset - chunkBytes(chunk.data)
    let data = chunk.data
    if (start > this.position) {
      this.deliver({ kind: 'missed', bytes: start - this.position, offset: start })
    } else if (start < this.position) {
      // A position inside a chunk (an id the client made up): only the bytes after it.
      data = Buffer.from(chunk.data, 'utf8')
        .subarray(this.position - start)
        .toString('utf8')
    }
    this.position = chunk.offset
    this.deliver({ kind: 'chunk', chunk: data === chunk.data ? chunk : { ...chunk, data } })
  }
}
