import { Writable } from 'node:stream'
import { afterEach, describe, expect, test } from 'vitest'
import { AppError } from '../../../src/errors.js'
import { callGateway, GatewayMissed } from '../../../src/fleet/client.js'
import { decodeFrame, encodeFrame } from '../../../src/fleet/codec.js'
import { listenGateway } from '../../../src/fleet/gateway.js'
import type { Gateway, GatewayTarget } from '../../../src/fleet/gateway.js'
import { secretMatches } from '../../../src/fleet/protocol.js'
import { createLogger } from '../../../src/logger.js'

const SECRET = 'f'.repeat(64)
const logged: string[] = []
const logger = createLogger({
  destination: new Writable({
    write(chunk: Buffer, _enc, done) {
      logged.push(chunk.toString())
      done()
    },
  }),
})

/** Services of one tenant's one session `s1`, enough to see which call arrived with what. */
function target(): GatewayTarget & { calls: unknown[][] } {
  const calls: unknown[][] = []
  const files = new Map<string, Uint8Array>()
  const mine = (tenant: string, id: string) => tenant === 'a' && id === 's1'
  return {
    engineId: 'E1',
    calls,
    sessions: {
      readFile: async (tenant, id, path) => (
        calls.push([tenant, id, path]),
        mine(tenant, id) ? files.get(path) : undefined
      ),
      writeFile: async (tenant, id, path, data) => {
        calls.push([tenant, id, path, data.byteLength])
        if (!mine(tenant, id)) return undefined
        files.set(path, data)
        return {}
      },
      delete: async (tenant, id) => (calls.push([tenant, id, 'delete']), mine(tenant, id)),
    },
    processes: {
      start: async () => {
        throw new AppError('QUOTA_EXCEEDED', 'too many processes', { retryable: true })
      },
      list: async () => [],
      get: async () => undefined,
      read: async () => undefined,
      writeStdin: async () => undefined,
      signal: async () => undefined,
      remove: async () => undefined,
    },
    code: {
      run: async (_t, _id, input, opts) =>
        new Promise((resolve) => {
          if ((input as { code: string }).code !== 'hang') return resolve(undefined)
          calls.push(['running'])
          opts?.signal?.addEventListener('abort', () => {
            calls.push(['aborted'])
            resolve(undefined)
          })
        }),
    },
  }
}

let gw: Gateway | undefined
afterEach(async () => {
  await gw?.close()
  gw = undefined
})

describe('fleet gateway', () => {
  test('frames carry bytes raw beside the JSON', () => {
    const bytes = new Uint8Array([0, 1, 2, 255])
    const back = decodeFrame(encodeFrame({ a: [Buffer.from('hi'), { b: bytes }], n: null })) as {
      a: [Uint8Array, { b: Uint8Array }]
      n: null
    }
    expect(Buffer.from(back.a[0]).toString()).toBe('hi')
    expect([...back.a[1].b]).toEqual([0, 1, 2, 255])
    expect(back.n).toBeNull()
    expect(() => decodeFrame(new Uint8Array([0, 0, 0, 9, 1]))).toThrow(/shorter/)
  })

  test('the secret compares whole, in constant time', () => {
    expect(secretMatches(SECRET, SECRET)).toBe(true)
    expect(secretMatches(SECRET.slice(1), SECRET)).toBe(false)
    expect(secretMatches(undefined, SECRET)).toBe(false)
    expect(secretMatches('', SECRET)).toBe(false)
  })

  test('serves calls with the secret, for the tenant they name; refuses without it', async () => {
    gw = await listenGateway({ secret: SECRET, host: '127.0.0.1', port: 0, maxBodyBytes: 1 << 20, logger })
    const t = target()
    const call = (args: [string, string, ...unknown[]], service = 'sessions', method = 'writeFile') =>
      callGateway(gw!.url, SECRET, 'E1', { service, method, args } as never)
    // Before the worker gave it its services: retryable 503.
    await expect(call(['a', 's1', '/f', new Uint8Array(3)])).rejects.toMatchObject({
      code: 'UNAVAILABLE',
      retryable: true,
    })
    gw.serve(t)
    expect(await call(['a', 's1', '/f', new Uint8Array([7, 8, 9])])).toEqual({})
    const read = (await call(['a', 's1', '/f'], 'sessions', 'readFile')) as Uint8Array
    expect([...read]).toEqual([7, 8, 9])
    // Another tenant: the service finds no session (the API answers 404).
    expect(await call(['b', 's1', '/f'], 'sessions', 'readFile')).toBeUndefined()
    // The service's error comes back as it was thrown.
    await expect(call(['a', 's1', { command: 'x' }], 'processes', 'start')).rejects.toMatchObject({
      code: 'QUOTA_EXCEEDED',
      retryable: true,
      message: 'too many processes',
    })
    // A session's deletion runs on its engine, for the tenant named.
    await expect(call(['b', 's1'], 'sessions', 'delete')).resolves.toBe(false)
    await expect(call(['a', 's1'], 'sessions', 'delete')).resolves.toBe(true)
    // Methods outside the list are refused; a worker without snapshots says so.
    await expect(call(['a', 's1'], 'sessions', 'create')).rejects.toMatchObject({ code: 'BAD_REQUEST' })
    await expect(call(['a', 's1'], 'snapshots', 'create')).rejects.toMatchObject({ code: 'UNSUPPORTED' })
    // A wrong or missing secret: 401 before the body is read, and the secret is never logged.
    await expect(
      callGateway(gw.url, 'x'.repeat(64), 'E1', {
        service: 'sessions',
        method: 'readFile',
        args: ['a', 's1', '/f'],
      }),
    ).rejects.toMatchObject({
      code: 'UNAVAILABLE',
      message: expect.stringContaining('fleet.secret') as unknown,
    })
    const bare = await fetch(`${gw.url}/internal/v1/call`, { method: 'POST', body: 'x' })
    expect(bare.status).toBe(401)
    expect(t.calls.map((c) => c[0])).toEqual(['a', 'a', 'b', 'b', 'a'])
    // Another engine's gateway: not delivered, safe to send again.
    await expect(
      callGateway(gw.url, SECRET, 'E2', { service: 'sessions', method: 'readFile', args: ['a', 's1', '/f'] }),
    ).rejects.toBeInstanceOf(GatewayMissed)
    expect(logged.join('')).not.toContain(SECRET)
  })

  test('a caller that goes away aborts the running cell; nobody listening is a miss', async () => {
    gw = await listenGateway({ secret: SECRET, host: '127.0.0.1', port: 0, maxBodyBytes: 1 << 20, logger })
    const t = target()
    gw.serve(t)
    const ac = new AbortController()
    const running = callGateway(
      gw.url,
      SECRET,
      'E1',
      { service: 'code', method: 'run', args: ['a', 's1', { code: 'hang' }] },
      ac.signal,
    ).catch((err: unknown) => err)
    await expect.poll(() => t.calls.some((c) => c[0] === 'running')).toBe(true)
    ac.abort()
    await running
    await expect.poll(() => t.calls.some((c) => c[0] === 'aborted')).toBe(true)
    const url = gw.url
    await gw.close()
    gw = undefined
    await expect(
      callGateway(url, SECRET, 'E1', { service: 'sessions', method: 'readFile', args: ['a', 's1', '/f'] }),
    ).rejects.toBeInstanceOf(GatewayMissed)
  })
})
