import { upgradeWebSocket } from '@hono/node-server'
import { z } from '@hono/zod-openapi'
import type { Context } from 'hono'
import type WebSocket from 'ws'
import { AppError } from '../../errors.js'
import type { SandboxTerminal } from '../../sandbox/types.js'
import type { App, HttpEnv } from '../app.js'
import type { AppDeps } from '../deps.js'
import { ErrorSchema } from '../schemas.js'
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
  const err = (description: string) => ({
    content: { 'application/json': { schema: ErrorSchema } },
    description,
  })
  app.openAPIRegistry.registerPath({
    method: 'get',
    path: '/v1/sessions/{id}/terminal',
    summary: 'Interactive terminal (WebSocket): bash on a pty in the session’s sandbox',
    description:
      'Upgrade to a WebSocket with subprotocol `sbx.terminal.v1`. Auth: `Authorization: Bearer <key>`, or (browsers) ' +
      'offer the subprotocol `sbx.bearer.<base64url key>` next to `sbx.terminal.v1`. Binary messages carry terminal ' +
      'bytes both ways. Text messages are JSON: in, `{"type":"resize","cols":N,"rows":N}` and ' +
      '`{"type":"input","data":"..."}`; out, `{"type":"exit","exitCode":N}` (or `"exitCode":null,"signal":"SIGKILL"`) ' +
      'once the shell ended (the socket then closes with 1000) and `{"type":"error","message":"..."}` for a bad ' +
      'control message. Closing the socket kills the terminal’s processes. Docker sessions in `sbx serve`, or in ' +
      '`sbx api` with engine routing (through the gateway of a worker of the session’s engine); ' +
      'refusals before the upgrade are plain HTTP statuses.',
    security: [{ bearer: [] }],
    request: {
      params: z.object({ id: z.string().openapi({ example: 'web' }) }),
      query: z.object({
        cols: z
          .string()
          .optional()
          .openapi({ example: '80', description: 'window columns, 1-65535 (default 80)' }),
        rows: z
          .string()
          .optional()
          .openapi({ example: '24', description: 'window rows, 1-65535 (default 24)' }),
      }),
    },
    responses: {
      101: { description: 'switching to the WebSocket' },
      400: err('not a WebSocket upgrade, or bad cols/rows'),
      401: err('no or unknown key'),
      404: err('no such session (or another tenant’s)'),
      501: err(
        'UNSUPPORTED: the session’s provider has no terminals, or this process is `sbx api` without engine routing',
      ),
    },
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
