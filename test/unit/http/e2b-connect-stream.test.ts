import { describe, expect, test } from 'vitest'
import { STREAM_HIGH_WATER_BYTES, openStream } from '../../../src/http/e2b/connect.js'

describe('a Connect server stream paces its sender by the client', () => {
  const big = 'x'.repeat(STREAM_HIGH_WATER_BYTES / 2)

  test('ready at once while the queue has room', async () => {
    const { stream } = openStream()
    expect(await stream.ready(1_000)).toBe(true)
    stream.send({ data: 'small' })
    expect(await stream.ready(1_000)).toBe(true)
  })

  test('a client that does not read makes it wait; reading lets it go on', async () => {
    const { response, stream } = openStream()
    for (let i = 0; i < 3; i++) stream.send({ data: big })
    expect(await stream.ready(10)).toBe(false)
    const waiting = stream.ready(30_000)
    const reader = response.body!.getReader()
    for (let i = 0; i < 3; i++) await reader.read()
    expect(await waiting).toBe(true)
  })

  test('an ended stream is ready (its sender then sees `ended`)', async () => {
    const { response, stream } = openStream()
    for (let i = 0; i < 3; i++) stream.send({ data: big })
    const waiting = stream.ready(30_000)
    await response.body!.cancel()
    expect(await waiting).toBe(true)
    expect(stream.ended).toBe(true)
  })
})
