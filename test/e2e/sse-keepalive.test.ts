import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { removeScope, startSbxServer, uniqueName } from '../support/sbx-cli.js'
import type { SbxServer } from '../support/sbx-cli.js'

/*
 * A quiet SSE stream is kept alive: with `server.sseKeepAliveMs` set low, a job's event stream whose
 * command prints nothing for a while, and the service's event stream with no events, carry
 * `: keepalive` comments (a proxy would otherwise close them); the job's stream still ends with its
 * result. Through `sbx serve`, over HTTP.
 */
describe('SSE keep-alive comments through sbx serve', () => {
  const scope = uniqueName('ssekeep')
  let srv: SbxServer
  beforeAll(async () => {
    srv = await startSbxServer('serve', {
      config: { queue: { prefix: scope }, server: { sseKeepAliveMs: 200 } },
    })
  }, 180_000)
  afterAll(async () => {
    await srv?.stop()
    await removeScope(scope)
  }, 120_000)

  /** Reads `res`'s body until `until(text)` holds or the stream ends. */
  async function readUntil(res: Response, until: (text: string) => boolean): Promise<string> {
    const reader = (res.body as ReadableStream<Uint8Array>).getReader()
    const decoder = new TextDecoder()
    let text = ''
    for (;;) {
      const { value, done } = await reader.read()
      if (done) return text
      text += decoder.decode(value, { stream: true })
      if (until(text)) {
        await reader.cancel()
        return text
      }
    }
  }

  test('a silent command: keep-alive comments between its output, then the result', async () => {
    const post = await srv.post('/v1/exec?wait=false', {
      provider: 'docker',
      profile: 'default',
      command: 'echo begun; sleep 1.2; echo end',
    })
    expect(post.status).toBe(202)
    const { id } = (await post.json()) as { id: string }
    const res = await srv.fetch(`/v1/jobs/${id}/events`)
    expect(res.status).toBe(200)
    const text = await readUntil(res, (t) => t.includes('event: result'))
    const between = text.slice(text.indexOf('begun'), text.indexOf('end\\n'))
    expect(between).toContain(': keepalive\n\n')
    expect(text).toContain('event: result')
  }, 60_000)

  test('the service event stream with no events sends keep-alives', async () => {
    const res = await srv.fetch('/v1/events')
    expect(res.status).toBe(200)
    const text = await readUntil(res, (t) => t.split(': keepalive').length > 2)
    expect(text.split(': keepalive').length).toBeGreaterThan(2)
  }, 30_000)
})
