import { connect } from 'node:net'
import type { Socket } from 'node:net'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { removeScopeContainers, startSbxServer, uniqueName } from '../support/sbx-cli.js'
import type { SbxServer } from '../support/sbx-cli.js'

/*
 * F12: a client that trickles its request must not hold a connection for Node's default 300 s.
 * `sbx serve` with `server.requestTimeoutMs: 2000`: a body sent at one byte per 200 ms and headers
 * sent the same way are cut (408, connection closed) within the bound plus the check interval,
 * while answers that take longer than the bound (`wait=true`, an SSE stream) still arrive.
 */

const REQUEST_TIMEOUT_MS = 2_000
/** The bound, Node's check interval (≤ 1 s) and scheduling slack on a loaded 2-core machine. */
const CUT_WITHIN_MS = REQUEST_TIMEOUT_MS + 1_000 + 2_000

const prefix = uniqueName('slowreq')
let srv: SbxServer

beforeAll(async () => {
  srv = await startSbxServer('serve', {
    config: { queue: { prefix }, server: { requestTimeoutMs: REQUEST_TIMEOUT_MS } },
  })
}, 120_000)

afterAll(async () => {
  await srv?.stop()
  await removeScopeContainers(prefix)
}, 60_000)

/** What a trickling client saw: when the server closed the socket, and what it answered. */
interface Trickle {
  closedAfterMs: number
  response: string
}

/**
 * Opens a raw connection, writes `head` at once, then `rest` one byte per `everyMs`, and resolves
 * when the server closes the connection (or rejects after `giveUpMs`: the server held it).
 */
function trickle(head: string, rest: string, everyMs: number, giveUpMs: number): Promise<Trickle> {
  const { port } = new URL(srv.url)
  return new Promise((resolve, reject) => {
    const socket: Socket = connect(Number(port), '127.0.0.1')
    const t0 = performance.now()
    let response = ''
    let sent = 0
    let timer: NodeJS.Timeout | undefined
    const giveUp = setTimeout(() => {
      socket.destroy()
      reject(new Error(`the server still held the connection after ${giveUpMs} ms`))
    }, giveUpMs)
    socket.setEncoding('utf8')
    socket.on('data', (d: string) => (response += d))
    socket.on('error', () => undefined)
    socket.on('close', () => {
      clearInterval(timer)
      clearTimeout(giveUp)
      resolve({ closedAfterMs: performance.now() - t0, response })
    })
    socket.on('connect', () => {
      socket.write(head)
      timer = setInterval(() => {
        if (sent < rest.length && !socket.destroyed) socket.write(rest[sent++]!)
      }, everyMs)
    })
  })
}

describe('sbx serve bounds the time to receive a request (server.requestTimeoutMs)', () => {
  test('a body trickled at 1 byte per 200 ms is cut with 408 within the bound', async () => {
    const body = JSON.stringify({ provider: 'docker', profile: 'default', command: 'echo never' })
    const head =
      'POST /v1/exec HTTP/1.1\r\nHost: 127.0.0.1\r\n' +
      `Authorization: Bearer ${srv.key}\r\nContent-Type: application/json\r\n` +
      `Content-Length: ${body.length}\r\n\r\n`
    const t = await trickle(head, body, 200, 30_000)
    expect(t.response).toMatch(/^HTTP\/1\.1 408 /)
    expect(t.closedAfterMs).toBeGreaterThanOrEqual(REQUEST_TIMEOUT_MS - 100)
    expect(t.closedAfterMs).toBeLessThan(CUT_WITHIN_MS)
  }, 60_000)

  test('headers trickled at 1 byte per 200 ms are cut with 408 within the bound', async () => {
    const headers = `GET /v1/sessions HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${srv.key}\r\n\r\n`
    const t = await trickle('', headers, 200, 30_000)
    expect(t.response).toMatch(/^HTTP\/1\.1 408 /)
    expect(t.closedAfterMs).toBeLessThan(CUT_WITHIN_MS)
  }, 60_000)

  test('an answer that takes longer than the bound still arrives (wait=true and SSE)', async () => {
    const command = `sleep ${(REQUEST_TIMEOUT_MS * 2) / 1000}; echo late`
    const waited = await srv.post('/v1/exec', {
      provider: 'docker',
      profile: 'default',
      sessionId: 'slow-answer',
      command,
    })
    expect(waited.status).toBe(200)
    expect(await waited.json()).toMatchObject({ state: 'completed', result: { stdout: 'late\n' } })

    const queued = await srv.post('/v1/exec?wait=false', {
      provider: 'docker',
      profile: 'default',
      sessionId: 'slow-answer',
      command,
    })
    expect(queued.status).toBe(202)
    const { id } = (await queued.json()) as { id: string }
    const t0 = performance.now()
    const events = await srv.fetch(`/v1/jobs/${id}/events`)
    expect(events.status).toBe(200)
    const text = await events.text()
    expect(performance.now() - t0).toBeGreaterThan(REQUEST_TIMEOUT_MS)
    expect(text).toContain('event: result')
    expect(text).toContain('late')
  }, 120_000)
})
