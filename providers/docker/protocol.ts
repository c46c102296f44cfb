/**
 * The sbx-agent wire protocol (mirror of `agent/protocol.h`; keep both in step).
 *
 * Every frame, both directions: `u32 len | u8 type | u32 id | payload[len - 5]`, big-endian;
 * strings are `u32 length + bytes`. The host picks request ids; the agent echoes them.
 */

/** Frame types. */
export const Frame = {
  EXEC: 1,
  CANCEL: 2,
  WRITE: 3,
  READ: 4,
  PING: 5,
  /** EXEC in the channel's persistent shell. */
  SHELL: 6,
  HELLO: 16,
  STDOUT: 17,
  STDERR: 18,
  EXIT: 19,
  OK: 20,
  ERR: 21,
  DATA: 22,
  PONG: 23,
} as const

/** Protocol version the agent announces in its HELLO frame. */
export const PROTOCOL_VERSION = 1
/** Largest frame the agent accepts (bytes). */
export const MAX_FRAME_BYTES = 64 * 1024 * 1024
const HEADER_BYTES = 9

/** One decoded frame. */
export interface AgentFrame {
  type: number
  id: number
  payload: Buffer
}

/** Incremental decoder of the agent's byte stream into frames. */
export class FrameDecoder {
  private buffered: Buffer = Buffer.alloc(0)

  /** Feeds bytes; returns every frame completed by them. Throws on a malformed length. */
  push(chunk: Buffer): AgentFrame[] {
    this.buffered = this.buffered.length === 0 ? chunk : Buffer.concat([this.buffered, chunk])
    const frames: AgentFrame[] = []
    let off = 0
    while (this.buffered.length - off >= 4) {
      const len = this.buffered.readUInt32BE(off)
      if (len < 5 || len > MAX_FRAME_BYTES) throw new Error(`sbx-agent sent a frame of ${len} bytes`)
      if (this.buffered.length - off < 4 + len) break
      frames.push({
        type: this.buffered.readUInt8(off + 4),
        id: this.buffered.readUInt32BE(off + 5),
        payload: this.buffered.subarray(off + HEADER_BYTES, off + 4 + len),
      })
      off += 4 + len
    }
    this.buffered = off === this.buffered.length ? Buffer.alloc(0) : this.buffered.subarray(off)
    return frames
  }
}

type Field = { u8: number } | { u32: number } | { u64: number } | { bytes: Uint8Array }

function encode(type: number, id: number, fields: readonly Field[]): Buffer {
  let size = HEADER_BYTES
  for (const f of fields) size += 'u8' in f ? 1 : 'u32' in f ? 4 : 'u64' in f ? 8 : 4 + f.bytes.length
  const out = Buffer.allocUnsafe(size)
  out.writeUInt32BE(size - 4, 0)
  out.writeUInt8(type, 4)
  out.writeUInt32BE(id, 5)
  let off = HEADER_BYTES
  for (const f of fields) {
    if ('u8' in f) off = out.writeUInt8(f.u8, off)
    else if ('u32' in f) off = out.writeUInt32BE(f.u32, off)
    else if ('u64' in f) off = out.writeBigUInt64BE(BigInt(f.u64), off)
    else {
      off = out.writeUInt32BE(f.bytes.length, off)
      out.set(f.bytes, off)
      off += f.bytes.length
    }
  }
  if (size - 4 > MAX_FRAME_BYTES) throw new RangeError(`frame of ${size} bytes exceeds ${MAX_FRAME_BYTES}`)
  return out
}

const str = (s: string): Field => ({ bytes: Buffer.from(s, 'utf8') })

/** What an EXEC frame carries. */
export interface ExecFrame {
  timeoutMs: number
  capBytes: number
  cwd: string
  command: string
  env: Record<string, string>
  stdin: Uint8Array
  /**
   * Run it in the persistent shell (a SHELL frame). `cwdExplicit`: cd to `cwd` first (it stays);
   * else `cwd` is only where a new shell starts.
   */
  shell?: { cwdExplicit: boolean }
}

/** Encodes a command to run: an EXEC frame, or a SHELL frame for the persistent shell. */
export function encodeExec(id: number, e: ExecFrame): Buffer {
  const env = Object.entries(e.env)
  return encode(e.shell ? Frame.SHELL : Frame.EXEC, id, [
    { u32: Math.min(Math.max(1, Math.ceil(e.timeoutMs)), 0xffff_ffff) },
    { u64: Math.max(0, Math.floor(Math.min(e.capBytes, Number.MAX_SAFE_INTEGER))) },
    { u32: e.shell?.cwdExplicit ? 1 : 0 },
    str(e.cwd),
    str(e.command),
    { u32: env.length },
    ...env.flatMap(([k, v]) => [str(k), str(v)]),
    { bytes: e.stdin },
  ])
}

/** Encodes a request without payload (CANCEL, PING). */
export function encodeEmpty(type: number, id: number): Buffer {
  return encode(type, id, [])
}

/** Encodes one chunk of a file write; the first chunk truncates, later ones append. */
export function encodeWrite(
  id: number,
  path: string,
  data: Uint8Array,
  first: boolean,
  mode = 0o644,
): Buffer {
  return encode(Frame.WRITE, id, [{ u32: first ? 1 : 0 }, { u32: mode }, str(path), { bytes: data }])
}

/** Encodes a file read. */
export function encodeRead(id: number, path: string): Buffer {
  return encode(Frame.READ, id, [str(path)])
}

/** Payload of an EXIT frame. */
export interface ExitFrame {
  /** Exit code, or the signal number when `signalled`. */
  value: number
  signalled: boolean
  timedOut: boolean
  truncated: boolean
  durationMs: number
  /** SHELL commands: the shell did not hold the previous shell call's state (restarted). */
  shellRestarted?: boolean
  /** SHELL commands: the shell itself ended during this command. */
  shellEnded?: boolean
}

/** Decodes an EXIT payload. */
export function decodeExit(p: Buffer): ExitFrame {
  const truncBits = p.readUInt8(6)
  return {
    signalled: p.readUInt8(0) === 1,
    value: p.readUInt32BE(1),
    timedOut: p.readUInt8(5) === 1,
    truncated: truncBits !== 0,
    durationMs: p.readUInt32BE(7),
    ...(p.length > 11
      ? { shellRestarted: (p.readUInt8(11) & 1) !== 0, shellEnded: (p.readUInt8(11) & 2) !== 0 }
      : {}),
  }
}

/** Payload of an ERR frame. */
export interface ErrFrame {
  errno: number
  /** What failed inside the sandbox: chdir, exec, fork, pipe, limit, open, mkdir, write, read, protocol. */
  op: string
  detail: string
}

/** Decodes an ERR payload. */
export function decodeErr(p: Buffer): ErrFrame {
  const errno = p.readUInt32BE(0)
  const opLen = p.readUInt32BE(4)
  const op = p.toString('utf8', 8, 8 + opLen)
  const detailLen = p.readUInt32BE(8 + opLen)
  return { errno, op, detail: p.toString('utf8', 12 + opLen, 12 + opLen + detailLen) }
}

/** Payload of the HELLO frame. */
export interface HelloFrame {
  version: number
  pid: number
  uid: number
  maxFrame: number
  /** Whether the container has an executable /bin/bash (the persistent shell needs it). */
  hasBash: boolean
}

/** HELLO flag bit: /bin/bash is executable (agent/protocol.h `SBX_HELLO_HAS_BASH`). */
const HELLO_HAS_BASH = 1

/** Decodes a HELLO payload (an agent without the flags word predates any-image support: it had bash). */
export function decodeHello(p: Buffer): HelloFrame {
  return {
    version: p.readUInt32BE(0),
    pid: p.readUInt32BE(4),
    uid: p.readUInt32BE(8),
    maxFrame: p.readUInt32BE(12),
    hasBash: p.length >= 20 ? (p.readUInt32BE(16) & HELLO_HAS_BASH) !== 0 : true,
  }
}
