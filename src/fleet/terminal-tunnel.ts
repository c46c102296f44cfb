import { Duplex } from 'node:stream'
import type { SandboxTerminal, TerminalExit } from '../sandbox/types.js'

/**
 * The gateway's terminal tunnel, after its HTTP upgrade: frames `[1-byte type][4-byte big-endian
 * length][payload]` both ways, so keystrokes, window sizes and the shell's exit share one socket.
 * API → worker: {@link DATA} (keyboard input) and {@link RESIZE} (`cols`, `rows` as two big-endian
 * uint16). Worker → API: {@link DATA} (terminal output), then {@link EXIT} (the JSON of a
 * {@link TerminalExit}) once the output is all sent; the worker then ends the socket. Closing the
 * socket from either side closes the terminal.
 */
export const DATA = 0
/** A window size: cols and rows as two big-endian uint16. */
export const RESIZE = 1
/** The shell's end: JSON of a {@link TerminalExit}. */
export const EXIT = 2

/** Largest frame payload accepted (bytes): far above a pty's chunk; a bigger one is a broken peer. */
const MAX_FRAME = 8 * 1024 * 1024

/** One frame of the terminal tunnel. */
export function terminalFrame(type: number, payload: Uint8Array): Buffer {
  const head = Buffer.alloc(5)
  head.writeUInt8(type, 0)
  head.writeUInt32BE(payload.byteLength, 1)
  return Buffer.concat([head, payload])
}

/**
 * Reads frames from `socket`, calling `onFrame` for each; a malformed frame destroys the socket, and
 * so does the peer's end (the HTTP sockets are half-open, and a tunnel ended by either side is over):
 * its `close` then tells both sides.
 */
function readFrames(socket: Duplex, onFrame: (type: number, payload: Buffer) => void): void {
  socket.once('end', () => socket.destroy())
  let buf: Buffer = Buffer.alloc(0)
  socket.on('data', (chunk: Buffer) => {
    buf = buf.byteLength === 0 ? chunk : Buffer.concat([buf, chunk])
    while (buf.byteLength >= 5) {
      const len = buf.readUInt32BE(1)
      if (len > MAX_FRAME) return void socket.destroy(new Error(`terminal frame of ${len} bytes`))
      if (buf.byteLength < 5 + len) break
      const type = buf.readUInt8(0)
      const payload = buf.subarray(5, 5 + len)
      buf = buf.subarray(5 + len)
      onFrame(type, payload)
      if (socket.destroyed) return
    }
  })
}

/**
 * Worker side: relays `terminal` over the tunnel's `socket` (after the 101) until either ends.
 * Output waits while the socket is full; the terminal closes when the socket does.
 */
export function serveTerminal(socket: Duplex, terminal: SandboxTerminal): void {
  const out = terminal.stream
  out.on('data', (chunk: Buffer) => {
    if (!socket.write(terminalFrame(DATA, chunk))) {
      out.pause()
      socket.once('drain', () => out.resume())
    }
  })
  out.on('error', () => undefined)
  readFrames(socket, (type, payload) => {
    if (type === DATA) {
      if (!out.write(payload)) {
        socket.pause()
        out.once('drain', () => socket.resume())
      }
    } else if (type === RESIZE && payload.byteLength === 4) {
      const cols = payload.readUInt16BE(0)
      const rows = payload.readUInt16BE(2)
      if (cols >= 1 && rows >= 1) terminal.resize(cols, rows)
    }
  })
  socket.once('close', () => terminal.close())
  void terminal.exited.then(async (exit) => {
    // After the output it is owed: the end of the stream comes once every chunk was taken.
    if (!out.readableEnded && !out.destroyed)
      await new Promise<void>((resolve) => {
        out.once('end', resolve)
        out.once('close', resolve)
      })
    if (!socket.destroyed) socket.end(terminalFrame(EXIT, Buffer.from(JSON.stringify(exit))))
  })
}

/**
 * API side: the terminal at the other end of the tunnel's `socket` (after the 101), as a
 * {@link SandboxTerminal}: `stream` carries its bytes, `resize` sends a window size, `exited`
 * resolves with the exit the worker sent (or a closed terminal's `{ exitCode: null }` when the
 * socket ended without one), `close` closes the socket and with it the terminal.
 */
export function tunnelledTerminal(socket: Duplex, pid: number): SandboxTerminal {
  let exit: TerminalExit | undefined
  let resolveExit!: (e: TerminalExit) => void
  const exited = new Promise<TerminalExit>((r) => (resolveExit = r))
  const stream = new Duplex({
    read() {
      socket.resume()
    },
    write(chunk: Buffer, _enc, done) {
      if (socket.destroyed) return done(new Error('the terminal is closed'))
      socket.write(terminalFrame(DATA, chunk), () => done())
    },
    final(done) {
      socket.end()
      done()
    },
    destroy(err, done) {
      socket.destroy()
      done(err)
    },
  })
  readFrames(socket, (type, payload) => {
    if (type === DATA) {
      if (!stream.push(payload)) socket.pause()
    } else if (type === EXIT) {
      try {
        exit = JSON.parse(payload.toString('utf8')) as TerminalExit
      } catch {
        exit = { exitCode: null }
      }
    }
  })
  socket.on('error', () => undefined)
  socket.once('close', () => {
    if (!stream.readableEnded) stream.push(null)
    resolveExit(exit ?? { exitCode: null })
  })
  return {
    stream,
    pid,
    resize(cols, rows) {
      if (socket.destroyed) return
      const p = Buffer.alloc(4)
      p.writeUInt16BE(cols, 0)
      p.writeUInt16BE(rows, 2)
      socket.write(terminalFrame(RESIZE, p))
    },
    exited,
    close() {
      socket.destroy()
    },
  }
}
