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
  /** Streams (agent/ports.c): a TCP connection to a port inside the sandbox. */
  PORT_OPEN: 11,
  /** Streams: a terminal (bash on a pty). */
  PTY_OPEN: 12,
  /** Streams: bytes into the stream. */
  STREAM_DATA: 13,
  /** Streams: u8 op ({@link StreamCtl}) and its arguments. */
  STREAM_CTL: 14,
  HELLO: 16,
  STDOUT: 17,
  STDERR: 18,
  EXIT: 19,
  OK: 20,
  ERR: 21,
  DATA: 22,
  PONG: 23,
  /** Before EXIT, per stream past its cap: the stream's last bytes and how many were dropped. */
  TAIL: 24,
  /** A stream is open: u32 pid of a terminal's process (0 for a port). */
  STREAM_OPENED: 30,
  /** Bytes out of a stream. */
  STREAM_OUT: 31,
  /** The sandbox side of a stream sends no more bytes. */
  STREAM_EOF: 32,
  /** A stream is gone: u8 kind (0 exited, 1 signalled, 2 closed), u32 code / signal / errno. */
  STREAM_CLOSED: 33,
  /** u32 bytes of STREAM_DATA the agent wrote into the sandbox side. */
  STREAM_ACK: 34,
} as const

/** Ops of a STREAM_CTL frame. */
export const StreamCtl = { EOF: 0, CLOSE: 1, RESIZE: 2, ACK: 3 } as const

/** Unacknowledged bytes either side may send on one stream (agent/protocol.h `STREAM_WINDOW`). */
export const STREAM_WINDOW_BYTES = 256 * 1024

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
  part?: { final: string; last: boolean; discard?: boolean },
): Buffer {
  // Flags: 1 truncate (the first frame); 2 `path` is the part file of an upload to `final` (removed
  // if a write fails); 4 the last frame: the part is renamed to `final`; 8 the upload was given up
  // between frames: the part is removed (no data).
  const flags = (first ? 1 : 0) | (part ? 2 | (part.last ? 4 : 0) | (part.discard ? 8 : 0) : 0)
  const fields = [{ u32: flags }, { u32: mode }, str(path), { bytes: data }]
  return encode(Frame.WRITE, id, part ? [...fields, str(part.final)] : fields)
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

/** Payload of a TAIL frame. */
export interface TailFrame {
  stream: 'stdout' | 'stderr'
  /** Bytes between the head and this tail that the agent dropped. */
  droppedBytes: number
  tail: Buffer
}

/** Decodes a TAIL payload. */
export function decodeTail(p: Buffer): TailFrame {
  return {
    stream: p.readUInt8(0) === 0 ? 'stdout' : 'stderr',
    droppedBytes: Number(p.readBigUInt64BE(1)),
    tail: p.subarray(9),
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
  /** Whether the agent writes uploads through a part file renamed into place (older agents do not). */
  partWrites: boolean
}

/** HELLO flag bit: /bin/bash is executable (agent/protocol.h `SBX_HELLO_HAS_BASH`). */
const HELLO_HAS_BASH = 1
/** HELLO flag bit: WRITE takes part files (agent/protocol.h `SBX_HELLO_PART_WRITES`). */
const HELLO_PART_WRITES = 2

/** Decodes a HELLO payload (an agent without the flags word predates any-image support: it had bash). */
export function decodeHello(p: Buffer): HelloFrame {
  return {
    version: p.readUInt32BE(0),
    pid: p.readUInt32BE(4),
    uid: p.readUInt32BE(8),
    maxFrame: p.readUInt32BE(12),
    hasBash: p.length >= 20 ? (p.readUInt32BE(16) & HELLO_HAS_BASH) !== 0 : true,
    partWrites: p.length >= 20 && (p.readUInt32BE(16) & HELLO_PART_WRITES) !== 0,
  }
}

/** Encodes the opening of a TCP connection to `127.0.0.1:port` inside the sandbox. */
export function encodePortOpen(id: number, port: number): Buffer {
  return encode(Frame.PORT_OPEN, id, [{ u32: port }])
}

/** What a PTY_OPEN frame carries. */
export interface PtyOpenFrame {
  cols: number
  rows: number
  cwd: string
  /** Empty: an interactive bash. */
  command: string
  env: Record<string, string>
}

/** Encodes the opening of a terminal. */
export function encodePtyOpen(id: number, t: PtyOpenFrame): Buffer {
  const env = Object.entries(t.env)
  return encode(Frame.PTY_OPEN, id, [
    { u32: t.cols },
    { u32: t.rows },
    str(t.cwd),
    str(t.command),
    { u32: env.length },
    ...env.flatMap(([k, v]) => [str(k), str(v)]),
  ])
}

/** Encodes bytes into a stream (raw payload, no length prefix). */
export function encodeStreamData(id: number, data: Uint8Array): Buffer {
  const out = Buffer.allocUnsafe(HEADER_BYTES + data.length)
  out.writeUInt32BE(5 + data.length, 0)
  out.writeUInt8(Frame.STREAM_DATA, 4)
  out.writeUInt32BE(id, 5)
  out.set(data, HEADER_BYTES)
  return out
}

/** Encodes a STREAM_CTL frame: EOF and CLOSE bare, ACK with a byte count, RESIZE with cols and rows. */
export function encodeStreamCtl(
  id: number,
  ctl: { op: 'eof' | 'close' } | { op: 'ack'; bytes: number } | { op: 'resize'; cols: number; rows: number },
): Buffer {
  switch (ctl.op) {
    case 'eof':
      return encode(Frame.STREAM_CTL, id, [{ u8: StreamCtl.EOF }])
    case 'close':
      return encode(Frame.STREAM_CTL, id, [{ u8: StreamCtl.CLOSE }])
    case 'ack':
      return encode(Frame.STREAM_CTL, id, [{ u8: StreamCtl.ACK }, { u32: ctl.bytes }])
    case 'resize':
      return encode(Frame.STREAM_CTL, id, [{ u8: StreamCtl.RESIZE }, { u32: ctl.cols }, { u32: ctl.rows }])
  }
}

/** How a stream ended (a STREAM_CLOSED payload). */
export interface StreamClosedFrame {
  kind: 'exited' | 'signalled' | 'closed'
  /** Exit code, signal number, or (closed) an errno, 0 for a clean close. */
  code: number
}

/** Decodes a STREAM_CLOSED payload. */
export function decodeStreamClosed(p: Buffer): StreamClosedFrame {
  const k = p.readUInt8(0)
  return { kind: k === 0 ? 'exited' : k === 1 ? 'signalled' : 'closed', code: p.readUInt32BE(1) }
}
