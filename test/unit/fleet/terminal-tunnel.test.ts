import { request as httpRequest } from 'node:http'
import { Duplex } from 'node:stream'
import { afterEach, describe, expect, test } from 'vitest'
import { AppError } from '../../../src/errors.js'
import { openGatewayTerminal } from '../../../src/fleet/client.js'
import { listenGateway } from '../../../src/fleet/gateway.js'
import type { Gateway, GatewayTarget } from '../../../src/fleet/gateway.js'
import { createLogger } from '../../../src/logger.js'
import type { SandboxTerminal, TerminalExit } from '../../../src/sandbox/types.js'
import {
  COLS_HEADER,
  ENGINE_HEADER,
  ROWS_HEADER,
  SECRET_HEADER,
  SESSION_HEADER,
  TENANT_HEADER,
  TERMINAL_OPTIONS_HEADER,
  TERMINAL_PATH,
  TERMINAL_UPGRADE,
} from '../../../src/fleet/protocol.js'

const SECRET = 't'.repeat(64)
const logger = createLogger({ level: 'silent' })

/** A terminal that answers each line typed with `> LINE` and records window sizes and its close. */
function fakeTerminal(): SandboxTerminal & { sizes: string[]; closed: boolean; exit(e: TerminalExit): void } {
  let finish!: (e: TerminalExit) => void
  const exited = new Promise<TerminalExit>((r) => (finish = r))
  const t = {
    sizes: [] as string[],
    closed: false,
    pid: 42,
    exited,
    stream: new Duplex({
      read() {},
      write(chunk: Buffer, _enc, done) {
        t.stream.push(`> ${chunk.toString().toUpperCase()}`)
        done()
      },
    }),
    resize(cols: number, rows: number) {
      t.sizes.push(`${cols}x${rows}`)
      t.stream.push(`size ${cols}x${rows}\n`)
    },
    close() {
      t.closed = true
      finish({ exitCode: null, signal: 'SIGKILL' })
    },
    exit(e: TerminalExit) {
      t.stream.push(null)
      finish(e)
    },
  }
  return t
}

let gw: Gateway | undefined
afterEach(async () => {
  await gw?.close()
  gw = undefined
})

/** Reads the terminal's output until it includes `text`. */
function until(stream: Duplex, text: string): Promise<string> {
  let seen = ''
  return new Promise((resolve) => {
    const on = (chunk: Buffer) => {
      seen += chunk.toString()
      if (!seen.includes(text)) return
      stream.off('data', on)
      resolve(seen)
    }
    stream.on('data', on)
  })
}

describe("the gateway's terminal tunnel", () => {
  test('keystrokes, resizes and the exit travel; another tenant is refused; closing closes', async () => {
    gw = await listenGateway({ secret: SECRET, host: '127.0.0.1', port: 0, maxBodyBytes: 1 << 20, logger })
    const made: ReturnType<typeof fakeTerminal>[] = []
    const target = {
      engineId: 'E1',
      streams: {
        openPort: () => Promise.reject(new AppError('UNSUPPORTED', 'no ports')),
        openTerminal: async (tenant: string, id: string, opts: { cols: number; rows: number }) => {
          if (tenant !== 'a' || id !== 's1') throw new AppError('NOT_FOUND', `no session ${id}`)
          const t = fakeTerminal()
          t.sizes.push(`${opts.cols}x${opts.rows}`)
          made.push(t)
          return { terminal: t, done: t.exited.then(() => undefined) }
        },
      },
    } as unknown as GatewayTarget
    gw.serve(target)
    const open = (tenant: string) =>
      openGatewayTerminal(gw!.url, SECRET, 'E1', { tenant, sessionId: 's1', cols: 80, rows: 24 })

    await expect(open('b')).rejects.toMatchObject({ code: 'NOT_FOUND' })
    await expect(
      openGatewayTerminal(gw.url, 'x'.repeat(64), 'E1', { tenant: 'a', sessionId: 's1', cols: 80, rows: 24 }),
    ).rejects.toMatchObject({ code: 'UNAVAILABLE' })

    const term = await open('a')
    expect(term.pid).toBe(42)
    const echoed = until(term.stream, '> HELLO')
    term.stream.write('hello\n')
    await echoed
    const resized = until(term.stream, 'size 100x40')
    term.resize(100, 40)
    await resized
    expect(made[0]?.sizes).toEqual(['80x24', '100x40'])
    // The shell's end: the output it is owed, then its exit.
    const rest = until(term.stream, 'bye')
    made[0]?.stream.push('bye')
    await rest
    made[0]?.exit({ exitCode: 3 })
    expect(await term.exited).toEqual({ exitCode: 3 })

    // Closing the API's side closes the worker's terminal.
    const second = await open('a')
    second.close()
    expect(await second.exited).toEqual({ exitCode: null })
    await made[1]?.exited
    expect(made[1]?.closed).toBe(true)
  })

  test('what the terminal runs, its environment and directory cross the tunnel; a bad options header is refused', async () => {
    gw = await listenGateway({ secret: SECRET, host: '127.0.0.1', port: 0, maxBodyBytes: 1 << 20, logger })
    const asked: unknown[] = []
    gw.serve({
      engineId: 'E1',
      streams: {
        openPort: () => Promise.reject(new AppError('UNSUPPORTED', 'no ports')),
        openTerminal: async (_tenant: string, _id: string, opts: Record<string, unknown>) => {
          const { signal: _signal, ...rest } = opts
          asked.push(rest)
          const t = fakeTerminal()
          return { terminal: t, done: t.exited.then(() => undefined) }
        },
      },
    } as unknown as GatewayTarget)
    const target = { tenant: 'a', sessionId: 's1', cols: 80, rows: 24 }
    const options = {
      command: 'exec /bin/bash -i -l',
      env: { TERM: 'xterm-256color', A: 'é b' },
      cwd: '/home/user',
    }
    const term = await openGatewayTerminal(gw.url, SECRET, 'E1', target, undefined, options)
    term.close()
    const plain = await openGatewayTerminal(gw.url, SECRET, 'E1', target)
    plain.close()
    expect(asked).toEqual([
      { cols: 80, rows: 24, ...options },
      { cols: 80, rows: 24 },
    ])

    const tooBig = { env: { BIG: 'x'.repeat(20_000) } }
    await expect(openGatewayTerminal(gw.url, SECRET, 'E1', target, undefined, tooBig)).rejects.toMatchObject({
      code: 'BAD_REQUEST',
      message: expect.stringContaining('fewer or shorter environment variables'),
    })
    // A header that is not the options' JSON: a 400, and no terminal opened.
    const status = await new Promise<number | undefined>((resolve, reject) => {
      const req = httpRequest(new URL(TERMINAL_PATH, gw!.url), {
        headers: {
          connection: 'Upgrade',
          upgrade: TERMINAL_UPGRADE,
          [SECRET_HEADER]: SECRET,
          [ENGINE_HEADER]: 'E1',
          [TENANT_HEADER]: 'a',
          [SESSION_HEADER]: 's1',
          [COLS_HEADER]: '80',
          [ROWS_HEADER]: '24',
          [TERMINAL_OPTIONS_HEADER]: Buffer.from('{"command":1}').toString('base64url'),
        },
      })
      req.once('response', (r) => {
        r.resume()
        resolve(r.statusCode)
      })
      req.once('upgrade', () => reject(new Error('the gateway opened a terminal for malformed options')))
      req.once('error', reject)
      req.end()
    })
    expect(status).toBe(400)
    expect(asked).toHaveLength(2)
  })
})
