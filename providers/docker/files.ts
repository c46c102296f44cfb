import { randomBytes } from 'node:crypto'
import { AppError, raceAbort } from '../../src/sandbox/index.js'
import type { AgentChannel } from './channel.js'
import { fileError } from './errors.js'
import { Frame, decodeErr, encodeEmpty, encodeRead, encodeWrite } from './protocol.js'

/** Cancellation and the inactivity deadline of a file operation. */
export interface FileOpOptions {
  signal?: AbortSignal
  /** A request with no frame from the agent for this long fails with SANDBOX_TIMEOUT (ms). */
  timeoutMs: number
  /** When a request went silent, how long the agent has to answer a ping (ms). @default 2000 */
  pingTimeoutMs?: number
}

/** Bytes per WRITE frame; large files go as several frames (first truncates, rest append). */
const WRITE_CHUNK_BYTES = 1024 * 1024

/**
 * Sends one request and resolves with its OK payload; DATA frames go to `onData`.
 * An abort stops waiting (the agent finishes the small operation on its own). A request silent for
 * `timeoutMs` fails with SANDBOX_TIMEOUT; then a ping tells a stuck operation (the agent still
 * answers: the request is cancelled, the channel and the other requests on it carry on) from a
 * paused or wedged agent (the channel is dropped, so every request on it fails at once).
 */
function request(
  channel: AgentChannel,
  action: 'read' | 'write',
  path: string,
  frame: (id: number) => Buffer,
  { signal, timeoutMs, pingTimeoutMs = 2_000 }: FileOpOptions,
  onData?: (chunk: Buffer) => void,
): Promise<Buffer> {
  signal?.throwIfAborted()
  const id = channel.allocateId()
  return new Promise<Buffer>((resolve, reject) => {
    const onSilence = (): void => {
      done(() =>
        reject(
          new AppError(
            'SANDBOX_TIMEOUT',
            `sandbox ${channel.sandboxId}: no answer about ${path} for ${timeoutMs} ms; ` +
              'the operation was cancelled (the container may be paused or overloaded)',
            { retryable: true },
          ),
        ),
      )
      channel.trySend(encodeEmpty(Frame.CANCEL, id))
      channel
        .ping(pingTimeoutMs)
        .catch(() =>
          channel.close(
            new AppError(
              'SANDBOX_TIMEOUT',
              `sandbox ${channel.sandboxId}: its agent stopped answering (a file operation waited ` +
                `${timeoutMs} ms, a ping ${pingTimeoutMs} ms); the container may be paused or overloaded`,
              { retryable: true },
            ),
          ),
        )
    }
    let timer = setTimeout(onSilence, timeoutMs)
    const done = (outcome: () => void): void => {
      clearTimeout(timer)
      channel.unsubscribe(id)
      signal?.removeEventListener('abort', onAbort)
      outcome()
    }
    const onAbort = (): void => done(() => reject(signal?.reason))
    signal?.addEventListener('abort', onAbort, { once: true })
    try {
      channel.subscribe(id, {
        onFrame(f) {
          clearTimeout(timer)
          timer = setTimeout(onSilence, timeoutMs)
          if (f.type === Frame.DATA) {
            try {
              onData?.(f.payload)
            } catch (err) {
              done(() => reject(err))
            }
          } else if (f.type === Frame.OK) {
            done(() => resolve(f.payload))
          } else if (f.type === Frame.ERR) {
            done(() => reject(fileError(channel.sandboxId, path, decodeErr(f.payload), action)))
          }
        },
        onClose(error) {
          done(() => reject(error))
        },
      })
      channel.send(frame(id))
    } catch (err) {
      done(() => reject(err))
    }
  })
}

/** The hidden part file an upload to `path` is written to before it is renamed into place. */
function partPath(path: string): string {
  const slash = path.lastIndexOf('/')
  return `${path.slice(0, slash + 1)}.${path.slice(slash + 1)}.sbx-part-${randomBytes(4).toString('hex')}`
}

/**
 * Writes `data` to the absolute `path`, creating parent directories (binary-safe). Atomic where the
 * agent supports it (every agent built from this tree): the bytes go to a hidden part file beside
 * `path`, which the last frame renames into place, so a write that fails (a full disk, a cancel, a
 * lost sandbox) leaves `path` as it was, never empty or cut short, and removes the part: a frame
 * that fails removes it in the agent; a cancel (between frames or during one) sends a discard once
 * the frame in flight has settled. A cancel during the last frame may still land the file whole.
 */
export async function writeFileOp(
  channel: AgentChannel,
  path: string,
  data: Uint8Array,
  opts: FileOpOptions,
): Promise<void> {
  const target = channel.partWrites ? partPath(path) : path
  const { signal, ...frameOpts } = opts
  let off = 0
  let inFlight: Promise<unknown> = Promise.resolve()
  try {
    do {
      signal?.throwIfAborted()
      const chunk = data.subarray(off, off + WRITE_CHUNK_BYTES)
      const first = off === 0
      const part = target === path ? undefined : { final: path, last: off + chunk.length >= data.length }
      // The frame itself is not aborted (the agent finishes it on its own); the caller stops waiting.
      inFlight = request(
        channel,
        'write',
        path,
        (id) => encodeWrite(id, target, chunk, first, 0o644, part),
        frameOpts,
      )
      await raceAbort(inFlight, signal)
      off += chunk.length
    } while (off < data.length)
  } catch (err) {
    if (target !== path && signal?.aborted) discardPart(channel, path, target, inFlight, frameOpts)
    throw err
  }
}

/** Removes the part file of an upload given up by a cancel, after its frame in flight (best effort). */
function discardPart(
  channel: AgentChannel,
  path: string,
  target: string,
  inFlight: Promise<unknown>,
  opts: FileOpOptions,
): void {
  const discard = { final: path, last: false, discard: true }
  void inFlight
    .catch(() => undefined)
    .then(() =>
      channel.closed
        ? undefined
        : request(
            channel,
            'write',
            path,
            (id) => encodeWrite(id, target, new Uint8Array(), false, 0o644, discard),
            opts,
          ),
    )
    .catch(() => undefined)
}

/** Reads the absolute `path` (binary-safe); more than `maxBytes` fails with PAYLOAD_TOO_LARGE. */
export async function readFileOp(
  channel: AgentChannel,
  path: string,
  maxBytes: number,
  opts: FileOpOptions,
): Promise<Uint8Array> {
  const chunks: Buffer[] = []
  let total = 0
  await request(
    channel,
    'read',
    path,
    (id) => encodeRead(id, path),
    opts,
    (chunk) => {
      total += chunk.length
      if (total > maxBytes) {
        throw new AppError(
          'PAYLOAD_TOO_LARGE',
          `${path} in sandbox ${channel.sandboxId} is larger than ${maxBytes} bytes; raise maxReadFileBytes or read it in parts`,
        )
      }
      chunks.push(chunk)
    },
  )
  return new Uint8Array(Buffer.concat(chunks))
}
