import { upgradeWebSocket } from '@hono/node-server'
import type { Context } from 'hono'
import type WebSocket from 'ws'
import { AppError } from '../../errors.js'
import type { SandboxTerminal } from '../../sandbox/types.js'
import type { App, HttpEnv } from '../app.js'
import type { AppDeps } from '../deps.js'
import { openDeadline, streamsUnavailable } from './stream-support.js'

/** Output held for a slow WebSocket reader before the terminal is paused (bytes). */
const HIGH_WATER_BYTES = 1024 * 1024

function size(c: Context<HttpEnv>, name: 'cols' | 'rows', fallback: number): number {
  const raw = c.req.query(name)
  if (raw === undefined) return fallback
  const v = /^\d{1,5}$/.test(raw) ? Number(raw) : NaN
  if (!(v >= 1 && v <= 65535))
    throw new AppError('BAD_REQUEST', `invalid ${name} ${JSON.stringify(raw)}: give an integer of 1-65535`)
  return v
}

/** One control message of the terminal protocol (text frames, JSON). */
type Control = { type: 'resize'; cols: number; rows: number } | { type: 'input'; data: string }

function parseControl(text: string): Control | string {
  let m: unknown
  try {
    m = JSON.parse(text)
  } catch {
    return 'a text message must be JSON: {"type":"resize","cols":N,"rows":N} or {"type":"input","data":"..."}; send keystrokes as binary messages'
  }
  const o = m as Record<string, unknown>
  const dim = (v: unknown): boolean => Number.isInteger(v) && (v as number) >= 1 && (v as number) <= 65535
  if (o?.['type'] === 'resize' && dim(o['cols']) && dim(o['rows']))
    return { type: 'resize', cols: o['cols'] as number, rows: o['rows'] as number }
  if (o?.['type'] === 'input' && typeof o['data'] === 'string') return { type: 'input', data: o['data'] }
  return `unknown control message ${text.slice(0, 100)}: use {"type":"resize","cols":N,"rows":N} (1-65535) or {"type":"input","data":"..."}`
}

/**
 * `GET /v1/sessions/{id}/terminal` (WebSocket, subprotocol `sbx.terminal.v1`): bash on a pty in the
 * session's sandbox. Binary messages carry terminal bytes both ways; text messages are JSON control
 * messages (`resize`, `input` in; `exit`, `error` out). Closing the socket kills the terminal's
 * processes; the shell's end sends `{"type":"exit",...}` and closes the socket (1000).
 */
export function registerTerminalRoutes(app: App, deps: AppDeps): void {
  app.get('/v1/sessions/:id/terminal', async (c) => {
    if (c.req.header('upgrade')?.toLowerCase() !== 'websocket')
      throw new AppError(
        'BAD_REQUEST',
        'the terminal is a WebSocket: connect with a WebSocket client (Upgrade: websocket, subprotocol sbx.terminal.v1)',
      )
    const cols = size(c, 'cols', 80)
    const rows = size(c, 'rows', 24)
    const streams = deps.streams
    if (!streams) throw streamsUnavailable('terminals')
    const { terminal } = await streams.openTerminal(c.get('principal').tenant, c.req.param('id'), {
      cols,
      rows,
    })
    const deadline = openDeadline(15_000, () => terminal.close())
    return upgradeWebSocket(c, {
      onOpen: (_evt, ws) => {
        deadline.opened()
        attach(terminal, ws.raw as WebSocket)
      },
      onMessage: (evt, ws) => {
        const d = evt.data
        if (d instanceof ArrayBuffer) return void write(terminal, ws.raw as WebSocket, Buffer.from(d))
        if (typeof d !== 'string') return
        const ctl = parseControl(d)
        if (typeof ctl === 'string') return ws.send(JSON.stringify({ type: 'error', message: ctl }))
        if (ctl.type === 'resize') terminal.resize(ctl.cols, ctl.rows)
        else write(terminal, ws.raw as WebSocket, Buffer.from(ctl.data, 'utf8'))
      },
      onClose: () => terminal.close(),
      onError: () => terminal.close(),
    })
  })
}

/** Keyboard input; a terminal that takes no more pauses the socket until it drains. */
function write(terminal: SandboxTerminal, raw: WebSocket, bytes: Buffer): void {
  if (!terminal.stream.write(bytes)) {
    raw.pause()
    terminal.stream.once('drain', () => raw.resume())
  }
}

/** Terminal output to the socket (paused while the socket holds more than HIGH_WATER_BYTES), then the exit. */
function attach(terminal: SandboxTerminal, raw: WebSocket): void {
  const out = terminal.stream
  out.on('data', (chunk: Buffer) => {
    raw.send(chunk, { binary: true }, () => {
      if (out.isPaused() && raw.bufferedAmount < HIGH_WATER_BYTES / 2) out.resume()
    })
    if (raw.bufferedAmount > HIGH_WATER_BYTES) out.pause()
  })
  out.on('error', () => undefined)
  void terminal.exited.then(async (exit) => {
    // After the output it is owed: the end of the stream comes once every chunk was taken.
    if (!out.readableEnded && !out.destroyed)
      await new Promise<void>((resolve) => {
        out.once('end', resolve)
        out.once('close', resolve)
      })
    if (raw.readyState !== raw.OPEN) return
    raw.send(JSON.stringify({ type: 'exit', ...exit }))
    raw.close(1000, 'terminal exited')
  })
}
