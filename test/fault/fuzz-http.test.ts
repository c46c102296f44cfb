import fc from 'fast-check'
import type { z } from 'zod'
import { afterAll, afterEach, beforeAll, describe, expect, test } from 'vitest'
import { ExecInputSchema, SessionInputSchema, ToolCallInputSchema } from '../../src/http/schemas.js'
import {
  deepJson,
  encodeSegment,
  hostileJson,
  hostileJsonText,
  hostileString,
  invalidUtf8,
  shapedLike,
} from '../support/hostile-input.js'
import {
  BODY_LIMIT,
  declareOnly,
  FILE_LIMIT,
  EMPTY_KEY,
  KEY,
  expectClientError,
  expectNoServerError,
  startLiveServer,
} from '../support/fuzz-server.js'
import type { LiveServer } from '../support/fuzz-server.js'

/*
 * Property-based fuzzing of every endpoint of a live server (embedded runtime, real Docker): bad
 * input is a 4xx with the JSON error body, nothing is a 5xx, and the server stays up.
 */

let live: LiveServer
const SESSION = 'fuzz-files'

beforeAll(async () => {
  live = await startLiveServer()
  const r = await api('/v1/sessions', { method: 'POST', body: JSON.stringify({ id: SESSION }) })
  expect(r.status).toBe(201)
}, 120_000)

afterAll(async () => {
  await live?.close()
}, 60_000)

afterEach(async () => {
  // The server survived the property: it still answers.
  expect(await (await api('/healthz', { key: null })).json()).toEqual({ ok: true })
})

/**
 * Each request goes on its own connection (`Connection: close`), so a failed property belongs to the
 * request that made it: on a reused keep-alive connection, the server may close the socket for a
 * previous request (draining an unread body past its time limit, or its keep-alive timer under load)
 * just as the next one is sent, and fetch then fails with "other side closed".
 */
function api(path: string, init: RequestInit & { key?: string | null } = {}): Promise<Response> {
  const headers = new Headers(init.headers)
  headers.set('connection', 'close')
  if (init.key !== null && !headers.has('authorization'))
    headers.set('authorization', `Bearer ${init.key ?? KEY}`)
  if (init.body !== undefined && !headers.has('content-type')) headers.set('content-type', 'application/json')
  return fetch(`${live.server.url}${path}`, { ...init, headers })
}

// FC_SEED=<seed a failure printed> replays that run.
const seed = process.env['FC_SEED'] ? { seed: Number(process.env['FC_SEED']) } : {}
const runs = (numRuns: number) => ({ numRuns, endOnFailure: true, ...seed })

const SHELL = /(^|__)(bash|shell|sh)$/
/** The JSON endpoints, each with a generator of request-shaped objects and its schema (the oracle). */
const JSON_ENDPOINTS: readonly {
  path: string
  schema?: z.ZodType
  fields: string[]
  shape: fc.Arbitrary<unknown>
}[] = [
  {
    path: '/v1/exec',
    schema: ExecInputSchema,
    fields: ['provider', 'profile', 'command', 'cwd', 'env', 'timeoutMs'],
    shape: shapedLike({
      provider: fc.constantFrom('docker', 'nope'),
      profile: fc.constantFrom('default', 'nope'),
      command: hostileString(),
      sessionId: hostileString(200),
      cwd: hostileString(5_000),
      env: fc.dictionary(fc.constantFrom('A', '__proto__', '1X', 'PATH'), hostileString(50)),
      stdin: hostileString(),
      timeoutMs: fc.oneof(fc.integer(), fc.double()),
      idempotent: fc.boolean(),
    }),
  },
  {
    path: '/v1/tool-calls',
    schema: ToolCallInputSchema,
    fields: ['name', 'arguments', 'callId', 'type'],
    shape: shapedLike({
      name: fc.constantFrom('bash', 'read', 'plugin__x__sh', 'x'.repeat(257)),
      arguments: fc.oneof(hostileString(), hostileJson(['command', 'cmd', 'cwd'])),
      callId: hostileString(200),
      type: hostileString(100),
      sessionId: hostileString(200),
    }),
  },
  {
    path: '/v1/sessions',
    schema: SessionInputSchema,
    fields: ['id', 'provider', 'profile'],
    shape: shapedLike({
      id: hostileString(200),
      provider: fc.constantFrom('docker', 'nope'),
      profile: fc.constantFrom('default', 'nope'),
    }),
  },
  {
    // No model is configured, so even a valid run is a 400.
    path: '/v1/agent-runs',
    fields: ['input', 'model', 'budget'],
    shape: shapedLike({
      input: hostileString(),
      sessionId: hostileString(200),
      model: hostileString(100),
      maxIterations: fc.integer(),
      budget: fc.record({ maxTotalTokens: fc.integer() }),
    }),
  },
]

/** Whether a body would pass the schema and then run a command in a sandbox (fuzzing skips those). */
function wouldRunCommand(path: string, body: unknown): boolean {
  if (path === '/v1/exec') return ExecInputSchema.safeParse(body).success
  if (path !== '/v1/tool-calls') return false
  const parsed = ToolCallInputSchema.safeParse(body)
  return parsed.success && SHELL.test(parsed.data.name)
}

function isValid(schema: z.ZodType | undefined, text: string): boolean {
  if (!schema) return false
  // The session body is optional: no body means the defaults.
  if (schema === SessionInputSchema && text.trim() === '') return true
  try {
    // The server decodes bodies as UTF-8 text, which drops a leading byte-order mark.
    return schema.safeParse(JSON.parse(text.replace(/^\ufeff/, ''))).success
  } catch {
    return false
  }
}

const CONTENT_TYPES = [
  'application/json',
  'application/json; charset=utf-8',
  'application/json; charset=latin1',
  'text/plain',
  'application/x-www-form-urlencoded',
  'multipart/form-data; boundary=xyz',
  'application/jsonx',
  '*/*',
  '',
] as const

describe('fuzzing the HTTP API (live server, real Docker)', () => {
  test('random and hostile JSON bodies on every JSON endpoint: 4xx JSON errors, never 5xx', async () => {
    const body = fc.oneof(
      ...JSON_ENDPOINTS.map((e) =>
        fc.tuple(
          fc.constant(e.path),
          fc.oneof(
            e.shape.map((v) => JSON.stringify(v)),
            hostileJsonText(e.fields),
          ),
        ),
      ),
    )
    await fc.assert(
      fc.asyncProperty(body, fc.constantFrom(...CONTENT_TYPES), async ([path, text], contentType) => {
        const e = JSON_ENDPOINTS.find((x) => x.path === path)!
        fc.pre(!wouldRunCommand(e.path, safeParse(text)))
        const res = await api(e.path, {
          method: 'POST',
          body: text,
          headers: { 'content-type': contentType },
        })
        const what = `POST ${e.path} (${contentType}) ${text.slice(0, 200)}`
        if (isValid(e.schema, text)) await expectNoServerError(res, what)
        else await expectClientError(res, what)
      }),
      runs(500),
    )
  }, 60_000)

  test('deep nesting (10k–30k levels) anywhere in a body: a 4xx, not a stack overflow', async () => {
    const where = fc.constantFrom(
      ['/v1/tool-calls', (d: string) => `{"name":"bash","arguments":${d}}`] as const,
      ['/v1/tool-calls', (d: string) => `{"name":"read","arguments":{"a":${d}}}`] as const,
      ['/v1/exec', (d: string) => `{"provider":"docker","profile":"default","command":${d}}`] as const,
      ['/v1/sessions', (d: string) => d] as const,
      ['/v1/agent-runs', (d: string) => `{"input":"x","budget":${d}}`] as const,
    )
    // Up to 30k arrays or 10.5k objects: deep, and still under the body limit.
    const depth = fc.oneof(fc.constant(10_000), fc.integer({ min: 10_000, max: 10_500 }))
    await fc.assert(
      fc.asyncProperty(
        where,
        depth,
        fc.constantFrom('array' as const, 'object' as const),
        async (w, d, kind) => {
          const [path, wrap] = w
          const levels = kind === 'array' ? Math.round(d * 2.8) : d
          const res = await api(path, { method: 'POST', body: wrap(deepJson(levels, kind)) })
          await expectClientError(res, `POST ${path} with ${levels} nested ${kind}s`)
        },
      ),
      runs(40),
    )
  }, 60_000)

  test('invalid UTF-8 bodies: 4xx JSON errors', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom(...JSON_ENDPOINTS.map((e) => e.path)),
        invalidUtf8,
        async (path, bytes) => {
          const res = await api(path, { method: 'POST', body: bytes })
          await expectClientError(res, `POST ${path} with invalid UTF-8`)
        },
      ),
      runs(200),
    )
  })

  // F9: a valid request whose only fault is an invalid UTF-8 sequence inside a string was accepted,
  // the sequence decoded to U+FFFD. A tool call of a non-shell tool runs nothing either way.
  test('invalid UTF-8 inside an otherwise valid body: 400 BAD_REQUEST, not a U+FFFD', async () => {
    await fc.assert(
      fc.asyncProperty(invalidUtf8, async (bytes) => {
        const inner = bytes.subarray(new TextEncoder().encode('{"command":"').length, -2)
        const enc = new TextEncoder()
        const body = new Uint8Array([
          ...enc.encode('{"name":"read","arguments":"'),
          ...inner.filter((b) => b !== 0x22 && b !== 0x5c && b >= 0x20),
          0xff,
          ...enc.encode('"}'),
        ])
        const res = await api('/v1/tool-calls', { method: 'POST', body })
        const { code } = await expectClientError(res, 'POST /v1/tool-calls with invalid UTF-8 in arguments')
        expect(res.status).toBe(400)
        expect(code).toBe('BAD_REQUEST')
      }),
      runs(100),
    )
  })

  // F9: NUL in a command, cwd or env value passed the schema and failed later as a job.
  test('NUL in command, cwd or an env value of an exec: 400 naming that field, before the provider', async () => {
    const field = fc.constantFrom('command', 'cwd', 'env')
    const text = fc
      .tuple(fc.string({ maxLength: 20 }), fc.string({ maxLength: 20 }))
      .map(([a, b]) => `${a}\u0000${b}`)
    await fc.assert(
      fc.asyncProperty(field, text, async (f, t) => {
        // An unknown provider: were the NUL let through, the answer would be UNKNOWN_PROVIDER.
        const body = {
          provider: 'nope',
          profile: 'default',
          command: f === 'command' ? t : 'true',
          ...(f === 'cwd' ? { cwd: `/${t}` } : {}),
          ...(f === 'env' ? { env: { A: t } } : {}),
        }
        const res = await api('/v1/exec', { method: 'POST', body: JSON.stringify(body) })
        const raw = await res.text()
        expect(res.status, raw).toBe(400)
        const { message } = (JSON.parse(raw) as { error: { message: string } }).error
        expect(message, raw).toContain(`"${f === 'env' ? 'env.A' : f}"`)
        expect(message, raw).toContain('NUL')
      }),
      runs(100),
    )
  })

  test('bodies over the limit: 413 PAYLOAD_TOO_LARGE, with or without a Content-Length', async () => {
    const target = fc.constantFrom(
      ...JSON_ENDPOINTS.map((e) => ({ method: 'POST', path: e.path, limit: BODY_LIMIT })),
      { method: 'PUT', path: `/v1/sessions/${SESSION}/files?path=big.bin`, limit: FILE_LIMIT },
      { method: 'POST', path: '/mcp', limit: BODY_LIMIT },
    )
    await fc.assert(
      fc.asyncProperty(
        target,
        fc.integer({ min: 1, max: 100_000 }),
        fc.boolean(),
        async (t, over, chunked) => {
          const bytes = new Uint8Array(t.limit + over).fill(0x20)
          bytes[0] = 0x7b // '{': JSON-looking, so only the size is wrong
          const body = chunked ? new Blob([bytes]).stream() : bytes
          const res = await api(t.path, {
            method: t.method,
            body,
            ...(chunked ? { duplex: 'half' } : {}),
            headers: { accept: 'application/json, text/event-stream' },
          } as RequestInit)
          const { code } = await expectClientError(res, `${t.method} ${t.path} ${t.limit + over} bytes`)
          expect(res.status).toBe(413)
          expect(code).toBe('PAYLOAD_TOO_LARGE')
        },
      ),
      runs(60),
    )
    await fc.assert(
      fc.asyncProperty(target, fc.integer({ min: 1, max: 2 ** 40 }), async (t, over) => {
        const r = await declareOnly(`${live.server.url}${t.path}`, t.method, t.limit + over)
        const label = `${t.method} ${t.path} declaring ${t.limit + over} bytes → ${r.status} ${r.text}`
        expect(r.status, label).toBe(413)
        expect(r.contentType, label).toMatch(/^application\/json/)
        expect(JSON.parse(r.text), label).toMatchObject({ error: { code: 'PAYLOAD_TOO_LARGE' } })
      }),
      runs(60),
    )
  }, 60_000)

  test('random paths and methods: never a 5xx, every error JSON', async () => {
    const segment = fc.oneof(
      fc.constantFrom('v1', 'jobs', 'sessions', 'files', 'agent-runs', 'events', 'exec', 'tool-calls'),
      fc.constantFrom(
        'mcp',
        'admin',
        'queues',
        'providers',
        '..',
        '.',
        '%2e%2e',
        '%00',
        '%ZZ',
        '%',
        '%C0%AF',
        '%ED%A0%80',
        '%FF',
        '',
      ),
      hostileString(300).map(encodeSegment),
    )
    const path = fc.array(segment, { minLength: 1, maxLength: 6 }).map((s) => `/${s.join('/')}`)
    const query = fc.option(
      fc
        .array(fc.tuple(hostileString(50), hostileString(50)), { maxLength: 3 })
        .map((kv) => `?${kv.map(([k, v]) => `${encodeSegment(k)}=${encodeSegment(v)}`).join('&')}`),
      { nil: '' },
    )
    const method = fc.constantFrom('GET', 'POST', 'PUT', 'DELETE', 'PATCH', 'OPTIONS', 'HEAD', 'PROPFIND')
    await fc.assert(
      fc.asyncProperty(path, query, method, fc.boolean(), async (p, q, m, authed) => {
        // POSTs to exec/tool-calls carry no body here, so they never reach a sandbox.
        const res = await api(`${p}${q}`, { method: m, key: authed ? KEY : null })
        // A HEAD answer has no body to tell a deliberate 501 UNSUPPORTED from a fault: the same path's
        // GET must then be that 501.
        if (m === 'HEAD' && res.status === 501) {
          const get = await api(`${p}${q}`, { method: 'GET', key: authed ? KEY : null })
          expect(await expectNoServerError(get, `GET ${p}${q}`), `HEAD ${p}${q}`).toBe(501)
        } else if (m === 'HEAD') expect(res.status, `HEAD ${p}${q}`).toBeLessThan(500)
        else await expectNoServerError(res, `${m} ${p}${q}`, { jsonRpc: p.startsWith('/mcp') })
      }),
      runs(400),
    )
  }, 60_000)

  test('random and malformed Authorization headers: 401 JSON unless the key is right', async () => {
    // Printable ASCII: fetch itself refuses other header bytes.
    const latin1 = fc.string({
      unit: fc.integer({ min: 0x20, max: 0x7e }).map((c) => String.fromCharCode(c)),
    })
    const header = fc.oneof(
      latin1,
      fc
        .tuple(fc.constantFrom('Bearer ', 'bearer ', 'BEARER\t', 'Basic ', 'Bearer', 'Token '), latin1)
        .map(([a, b]) => a + b),
      fc
        .tuple(fc.constantFrom('', ' ', '\t'), fc.constantFrom('', ' x', '\t', KEY.slice(1)))
        .map(([sp, tail]) => `Bearer ${sp}${KEY}${tail}`),
      fc.integer({ min: 1, max: 7_000 }).map((n) => `Bearer ${'k'.repeat(n)}`),
    )
    const target = fc.constantFrom('/v1/sessions', '/v1/providers', '/v1/jobs/x', '/mcp')
    await fc.assert(
      fc.asyncProperty(header, target, async (h, path) => {
        const res = await api(path, { headers: { authorization: h } })
        // Fetch trims the value the way a proxy would; the oracle is the server's own rule.
        const token = /^Bearer\s+(\S+)\s*$/i.exec(h.trim())?.[1]
        if (token === KEY) return void (await expectNoServerError(res, `${path} with the right key`))
        const { code } = await expectClientError(res, `${path} with authorization ${JSON.stringify(h)}`)
        expect(res.status).toBe(401)
        expect(code).toBe('UNAUTHORIZED')
      }),
      runs(300),
    )
  })

  test('random ids in /v1/jobs, /v1/sessions and /v1/agent-runs: 4xx JSON errors', async () => {
    const route = fc.constantFrom(
      ['GET', (id: string) => `/v1/jobs/${id}`],
      ['DELETE', (id: string) => `/v1/jobs/${id}`],
      ['GET', (id: string) => `/v1/jobs/${id}/events`],
      ['GET', (id: string) => `/v1/agent-runs/${id}`],
      ['DELETE', (id: string) => `/v1/agent-runs/${id}`],
      ['GET', (id: string) => `/v1/agent-runs/${id}/events`],
      ['DELETE', (id: string) => `/v1/sessions/${id}`],
      ['GET', (id: string) => `/v1/sessions/${id}/files?path=a.txt`],
      ['PUT', (id: string) => `/v1/sessions/${id}/files?path=a.txt`],
    )
    const id = fc.oneof(hostileString(400), fc.uuid(), fc.constantFrom('j-0', 's-1', '%00', '..'))
    await fc.assert(
      fc.asyncProperty(route, id, async ([method, path], raw) => {
        const p = path(encodeSegment(raw))
        // `..` (or `%2e%2e`) as the id leaves the resource: the URL is normalised before it is sent
        // (`/v1/jobs/../events` is `/v1/events`, the service's own event stream), so it is no id.
        fc.pre(new URL(p, 'http://x').pathname === p.split('?')[0])
        // A tenant with nothing: ids the fuzzing tenant created earlier are unknown here.
        const res = await api(p, { method, key: EMPTY_KEY, ...(method === 'PUT' ? { body: 'x' } : {}) })
        await expectClientError(res, `${method} ${p.slice(0, 200)}`)
      }),
      runs(400),
    )
  }, 60_000)

  test('random query strings: `wait` on /v1/exec and `path` on the files of a real session', async () => {
    const wait = fc.oneof(fc.constantFrom('true', 'false', 'TRUE', '1', '', 'yes'), hostileString(100))
    await fc.assert(
      fc.asyncProperty(wait, fc.boolean(), async (w, twice) => {
        const q = `?wait=${encodeSegment(w)}${twice ? '&wait=false' : ''}`
        // An unknown provider keeps any request that passes the query check out of Docker.
        const body = JSON.stringify({ provider: 'nope', profile: 'default', command: 'true' })
        await expectClientError(await api(`/v1/exec${q}`, { method: 'POST', body }), `POST /v1/exec${q}`)
      }),
      runs(200),
    )
    const path = fc.oneof(
      hostileString(5_000),
      fc.constantFrom(
        '/etc/passwd',
        '/proc/self/status',
        '/proc/1/status',
        '/workspace',
        '/',
        '.',
        'a/../../b',
      ),
    )
    await fc.assert(
      fc.asyncProperty(path, fc.constantFrom('GET', 'PUT'), async (p, method) => {
        const q = `?path=${encodeSegment(p)}`
        const res = await api(`/v1/sessions/${SESSION}/files${q}`, {
          method,
          ...(method === 'PUT'
            ? { body: 'fuzz', headers: { 'content-type': 'application/octet-stream' } }
            : {}),
        })
        if (res.ok) return void (await res.arrayBuffer())
        await expectClientError(res, `${method} files${q.slice(0, 200)}`)
      }),
      runs(150),
    )
  }, 60_000)

  // Found by this suite: `fileError` mapped errnos it did not know (EIO from /proc/1/mem) to a 500.
  test('reading /proc/1/mem of a session is a 4xx (EIO is the caller’s path, not a service fault)', async () => {
    const res = await api(`/v1/sessions/${SESSION}/files?path=${encodeSegment('/proc/1/mem')}`)
    await expectClientError(res, 'GET files?path=/proc/1/mem')
  })

  test('/mcp with junk JSON-RPC: a 4xx (JSON-RPC or JSON error body), never a 5xx', async () => {
    const rpc = fc.oneof(
      hostileJsonText(['jsonrpc', 'method', 'id', 'params']),
      shapedLike({
        jsonrpc: fc.constantFrom('2.0', '1.0', 2),
        method: fc.constantFrom('tools/call', 'tools/list', 'ping', 'initialize', 'notifications/x'),
        id: fc.oneof(fc.integer(), hostileString(50)),
        params: hostileJson(['name', 'arguments', 'protocolVersion']),
      }).map((v) => JSON.stringify(v)),
    )
    const headers = fc.record({
      accept: fc.constantFrom('application/json, text/event-stream', 'application/json', '*/*', 'text/html'),
      'content-type': fc.constantFrom('application/json', 'text/plain', ''),
      'mcp-session-id': fc.option(hostileString(100).map(encodeSegment), { nil: undefined }),
    })
    await fc.assert(
      fc.asyncProperty(rpc, headers, fc.constantFrom('POST', 'GET', 'DELETE'), async (text, h, method) => {
        const parsed = safeParse(text)
        // A well-formed initialize would open a real MCP session: not junk.
        fc.pre(!(isRecord(parsed) && parsed['method'] === 'initialize' && isRecord(parsed['params'])))
        const sent = Object.fromEntries(Object.entries(h).filter(([, v]) => v !== undefined)) as Record<
          string,
          string
        >
        const res = await api('/mcp', { method, headers: sent, ...(method === 'POST' ? { body: text } : {}) })
        const body = await res.text()
        const label = `${method} /mcp ${JSON.stringify(sent)} ${text.slice(0, 200)} → ${res.status} ${body.slice(0, 300)}`
        expect(res.status, label).toBeGreaterThanOrEqual(400)
        expect(res.status, label).toBeLessThan(500)
        const err = (JSON.parse(body) as { error?: { code?: unknown; message?: unknown } }).error
        expect(['string', 'number'], label).toContain(typeof err?.code)
        expect(typeof err?.message, label).toBe('string')
      }),
      runs(300),
    )
  }, 60_000)
})

function safeParse(text: string): unknown {
  try {
    return JSON.parse(text)
  } catch {
    return undefined
  }
}

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v)
}
