import type { Duplex } from 'node:stream'
import { afterAll, describe, expect, test } from 'vitest'
import type { Sandbox } from '../../../../src/sandbox/types.js'
import { dockerFixture, quick, rejectionOf } from '../../../support/docker-fixture.js'

/**
 * Port and terminal streams of the Docker provider on the real engine: many connections at once,
 * a terminal's close kills its background jobs too, and a container killed from outside ends every
 * stream with SANDBOX_LOST instead of leaving it hanging.
 */
const fx = dockerFixture()

afterAll(async () => {
  expect(await fx.cleanup()).toBe(0)
})

const START_HTTPD =
  'mkdir -p /tmp/www && echo page > /tmp/www/index.html && ' +
  '{ httpd -f -p 8000 -h /tmp/www </dev/null >/dev/null 2>&1 & } ; ' +
  'for i in $(seq 100); do netstat -ltn | grep -q ":8000 " && break; sleep 0.05; done'

async function get(sb: Sandbox, path: string): Promise<string> {
  const s = await sb.openPort!(8000)
  let out = ''
  s.on('data', (d: Buffer) => (out += d.toString()))
  const ended = new Promise<void>((resolve, reject) => {
    s.once('end', resolve)
    s.once('error', reject)
  })
  // No half-close (end()): busybox httpd's listen backlog is 9, and a half-closed connection still
  // waiting in an overflowed backlog is sometimes answered with nothing.
  s.write(`GET ${path} HTTP/1.0\r\nHost: localhost\r\n\r\n`)
  await ended
  s.destroy()
  return out
}

const until = (s: Duplex, text: string): Promise<string> =>
  new Promise((resolve) => {
    let seen = ''
    const on = (d: Buffer): void => {
      seen += d.toString()
      if (seen.includes(text)) {
        s.off('data', on)
        resolve(seen)
      }
    }
    s.on('data', on)
  })

describe('docker provider streams', () => {
  test('the capability flags are set; 64 connections at once all get their answer', async () => {
    const sb = await fx.create()
    expect(sb.ports).toBe(true)
    expect(sb.terminals).toBe(true)
    await sb.exec({ ...quick, command: START_HTTPD })
    const answers = await Promise.all(Array.from({ length: 64 }, () => get(sb, '/index.html')))
    for (const a of answers) expect(a).toMatch(/^HTTP\/1\.[01] 200 [\s\S]*\r\n\r\npage\n$/)
    expect(await rejectionOf(sb.openPort!(0))).toMatchObject({ code: 'BAD_REQUEST' })
  })

  test("closing a terminal kills its shell's background jobs too", async () => {
    const sb = await fx.create()
    const t = await sb.openTerminal!({ cols: 80, rows: 24 })
    const seen = until(t.stream, 'bg=')
    t.stream.write('sleep 1000 & echo bg=$!; echo done-$((1+1))\n')
    const out = await until(t.stream, 'done-2')
    await seen
    const pid = /bg=(\d+)/.exec(out)?.[1]
    expect(pid).toBeDefined()
    t.close()
    expect(await t.exited).toEqual({ exitCode: null })
    // Killed by then; `kill -0` still finds it until its zombie is reaped, so look until it is gone.
    let state = 'alive\n'
    for (let i = 0; i < 100 && state === 'alive\n'; i++)
      state = (await sb.exec({ ...quick, command: `kill -0 ${pid} 2>/dev/null && echo alive || echo gone` }))
        .stdout
    expect(state).toBe('gone\n')
  })

  test('a container killed from outside ends open streams with SANDBOX_LOST', async () => {
    const sb = await fx.create()
    await sb.exec({ ...quick, command: START_HTTPD })
    const port = await sb.openPort!(8000)
    const portError = new Promise<unknown>((resolve) => port.once('error', resolve))
    const t = await sb.openTerminal!({ cols: 80, rows: 24 })
    const termError = new Promise<unknown>((resolve) => t.stream.once('error', resolve))
    await fx.provider.docker.getContainer(sb.ref.id).kill()
    expect(await portError).toMatchObject({ code: 'SANDBOX_LOST' })
    expect(await termError).toMatchObject({ code: 'SANDBOX_LOST' })
    expect(await t.exited).toEqual({ exitCode: null })
  })
})
