import { createServer } from 'node:net'
import type { AddressInfo } from 'node:net'
import { describe, expect, test } from 'vitest'
import { daytonaPortClosed } from '../../../providers/daytona/preview.js'
import { e2bPortClosed } from '../../../providers/e2b/preview.js'
import { connectPreview } from '../../../src/sandbox/preview-connection.js'

describe("the preview proxies' 'port closed' answers", () => {
  test("E2B's proxy error is told apart from a server's own 502", () => {
    expect(
      e2bPortClosed(
        '{"sandboxId":"i1","message":"The sandbox is running but port is not open","port":8000,"code":502}',
      ),
    ).toBe(true)
    expect(e2bPortClosed('<html>502 Bad Gateway</html>')).toBe(false)
    expect(e2bPortClosed('{"message":"upstream down","code":502}')).toBe(false)
  })

  test("Daytona's proxy error is told apart from a server's own 502", () => {
    expect(
      daytonaPortClosed('{"statusCode":502,"message":"bad gateway: dial tcp","code":"BAD_GATEWAY"}'),
    ).toBe(true)
    expect(daytonaPortClosed('{"statusCode":502,"message":"mine","code":"UPSTREAM"}')).toBe(false)
    expect(daytonaPortClosed('not json')).toBe(false)
  })
})

describe('connectPreview', () => {
  test('describes the preview host, base path and headers; connects to connectTo when given', async () => {
    const server = createServer((s) => s.end())
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
    const port = (server.address() as AddressInfo).port
    try {
      const stream = await connectPreview({
        url: 'https://8000-abc.example.invalid/base/',
        connectTo: `http://127.0.0.1:${port}`,
        headers: { 'x-token': 't' },
        unreachable: () => false,
        provider: 'Test',
      })
      expect(stream.preview?.host).toBe('8000-abc.example.invalid')
      expect(stream.preview?.basePath).toBe('/base')
      expect(stream.preview?.headers).toEqual({ 'x-token': 't' })
      stream.destroy()
    } finally {
      server.close()
    }
  })

  test('an unreachable proxy is UNAVAILABLE, naming the provider and the host', async () => {
    const server = createServer()
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
    const port = (server.address() as AddressInfo).port
    server.close()
    await expect(
      connectPreview({
        url: `http://127.0.0.1:${port}`,
        headers: {},
        unreachable: () => false,
        provider: 'Test',
      }),
    ).rejects.toMatchObject({
      code: 'UNAVAILABLE',
      message: expect.stringContaining(`Test's preview proxy at 127.0.0.1:${port}`),
    })
  })
})
