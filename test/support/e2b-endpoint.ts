/*
 * The E2B provider's counterpart in tests: our own E2B-compatible endpoint (`node bin/sbx.js serve`
 * as a child process, each E2B sandbox one of its Docker sessions), reached through a recording
 * loopback proxy so tests can see what the SDK sent (method, path, create bodies, bytes streamed).
 * The proxy changes nothing unless told to (`maxPageSize`, `leakKeyInErrors`). Failure tests reach
 * the Docker container behind a sandbox with {@link E2BEndpoint.containerOf}.
 */
import { execFile } from 'node:child_process'
import { EventEmitter, on } from 'node:events'
import { type IncomingMessage, type ServerResponse, createServer, request } from 'node:http'
import type { AddressInfo, Socket } from 'node:net'
import { connect } from 'node:net'
import { promisify } from 'node:util'
import type { ConfigInput } from '../../src/config/schema.js'
import type { ProfileInput } from '../../src/sandbox/profiles.js'
import { sessionHash } from '../../src/sessions/keys.js'
import { type SbxServer, removeScope, scopeContainers, startSbxServer, uniqueName } from './sbx-cli.js'

const run = promisify(execFile)

/** One request the endpoint served through the proxy. */
export interface E2BRequest {
  method: string
  path: string
  /** The `E2b-Sandbox-Id` header (envd requests). */
  sandboxId?: string
  /** The JSON body of a control-plane POST (create, timeout, connect), parsed. */
  body?: unknown
  /** The JSON answer of a create (`POST /v2/sandboxes`, `/sandboxes`), once it ended. */
  answer?: unknown
  /** The answer's status, once it came. */
  status?: number
  /** The answer's headers, once it came. */
  headers?: Record<string, string | string[] | undefined>
  /** Body bytes the answer carried so far (the envelopes of a streaming call included). */
  bytesOut: number
  /** Time from the request's arrival to its answer's end (ms), once it ended. */
  durationMs?: number
  /** HTTP version the client spoke. */
  httpVersion: string
}

/** Options of {@link startE2BEndpoint}. */
export interface E2BEndpointOptions {
  /** Profile behind E2B's `base` template (merged over E2B's user and home). @default the built-in `e2b` profile */
  base?: Omit<ProfileInput, 'provider'>
  /** The service's quotas (each tenant's). @default requestsPerSecond 1000, processOutputBytes 64 MiB */
  quotas?: ConfigInput['quotas']
  /** Largest page the proxy lets `GET /v2/sandboxes` ask for (rewrites `limit`), so listing must page. */
  maxPageSize?: number
  /**
   * Appends the request's `X-API-Key` to the message of every 401 the proxy passes on (as a careless
   * server could), so tests see that the provider's redaction works. Test-only: our endpoint never does.
   */
  leakKeyInErrors?: boolean
  /** Tag of the scope (`queue.prefix`, container label). @default 'e2bep' */
  tag?: string
  /** Config keys merged over the generated config. */
  config?: Partial<ConfigInput>
}

/** A running {@link startE2BEndpoint}. */
export interface E2BEndpoint {
  /** Pass as `apiUrl` (E2B_API_URL): the recording proxy. */
  readonly apiUrl: string
  /** Pass as `sandboxUrl` (E2B_SANDBOX_URL): the same origin. */
  readonly sandboxUrl: string
  /** Pass as the E2B provider's `previewUrl` (SBX_E2B_PREVIEW_URL): host names are served on the same port. */
  readonly previewUrl: string
  /** The E2B domain create reports (`localhost:<port>`). */
  readonly domain: string
  /** The API key of the endpoint's tenant (`default`). */
  readonly apiKey: string
  /** `queue.prefix` of the server and the `sandbox-router.scope` label of its containers. */
  readonly scope: string
  readonly server: SbxServer
  /** Every request served so far, oldest first. */
  readonly requests: E2BRequest[]
  /** Emits `answered` (an {@link E2BRequest}) when a request's answer began. */
  readonly events: EventEmitter
  /** `GET /sandboxes/{id}` as E2B answers it; undefined once it is gone (404). */
  info(sandboxId: string): Promise<E2BSandboxInfo | undefined>
  /** The body of the create request that made `sandboxId` (what the client asked E2B for). */
  createBody(sandboxId: string): Record<string, unknown> | undefined
  /** Ids of the tenant's sandboxes that are running or paused. */
  sandboxIds(): Promise<string[]>
  /** The Docker container behind a sandbox (its session's container), if it has one. */
  containerOf(sandboxId: string): Promise<string | undefined>
  /** Resolves when the server logs that `sandboxId`'s lifetime ended (it then deletes its session). */
  timedOut(sandboxId: string, timeoutMs?: number): Promise<void>
  /** Resolves with the first request after now that `match` accepts, once its answer began. */
  nextAnswer(match: (r: E2BRequest) => boolean): Promise<E2BRequest>
  /** Ids of the Docker containers of the server's scope (running or not). */
  containers(): Promise<string[]>
  /**
   * Stops the server (which destroys its sandboxes) and the proxy; resolves with how many of the
   * scope's containers were left after the server stopped (then removes them).
   */
  close(): Promise<number>
}

/** What `GET /sandboxes/{id}` answers (the fields tests read). */
export interface E2BSandboxInfo {
  sandboxID: string
  templateID: string
  metadata: Record<string, string>
  state: string
  startedAt: string
  endAt: string
  lifecycle?: { onTimeout: string; autoResume: boolean }
}

/**
 * Starts `sbx serve` with E2B's `base` template on the Docker provider, and a recording proxy in front
 * of it. Resolves once both listen.
 */
export async function startE2BEndpoint(options: E2BEndpointOptions = {}): Promise<E2BEndpoint> {
  const scope = uniqueName(options.tag ?? 'e2bep')
  const profiles: ConfigInput['profiles'] = options.base
    ? {
        'e2b-test': {
          provider: 'docker',
          cwd: '/home/user',
          env: { HOME: '/home/user' },
          user: '1001:1001',
          ...options.base,
        },
      }
    : {}
  const profile = options.base ? 'e2b-test' : 'e2b'
  const server = await startSbxServer('serve', {
    config: {
      queue: { prefix: scope },
      // E2B commands stream from a ring in the sandbox that drops the oldest unread bytes past
      // processOutputBytes (envd applies backpressure instead, docs/e2b-endpoint.md): room for the
      // conformance suite's 5 MiB outputs.
      quotas: { requestsPerSecond: 1000, processOutputBytes: 64 << 20, ...options.quotas },
      profiles,
      e2b: { templates: { base: profile } },
      ...options.config,
    },
  })
  const target = new URL(server.url)
  const requests: E2BRequest[] = []
  const events = new EventEmitter()
  events.setMaxListeners(0)
  const sockets = new Set<Socket>()

  const proxy = createServer((req: IncomingMessage, res: ServerResponse) => {
    const started = performance.now()
    const url = new URL(req.url ?? '/', 'http://proxy')
    const sandboxId = req.headers['e2b-sandbox-id']
    const entry: E2BRequest = {
      method: req.method ?? 'GET',
      path: url.pathname,
      httpVersion: req.httpVersion,
      bytesOut: 0,
      ...(typeof sandboxId === 'string' ? { sandboxId } : {}),
    }
    requests.push(entry)
    if (options.maxPageSize && req.method === 'GET' && url.pathname === '/v2/sandboxes') {
      const limit = Number(url.searchParams.get('limit') ?? 100)
      url.searchParams.set('limit', String(Math.min(limit, options.maxPageSize)))
    }
    const upstream = request(
      {
        host: target.hostname,
        port: target.port,
        method: req.method,
        path: url.pathname + url.search,
        headers: req.headers,
      },
      (answer) => {
        entry.status = answer.statusCode ?? 502
        entry.headers = answer.headers
        events.emit('answered', entry)
        if (options.leakKeyInErrors && answer.statusCode === 401) {
          const chunks: Buffer[] = []
          answer.on('data', (c: Buffer) => chunks.push(c))
          answer.on('end', () => {
            const body = JSON.parse(Buffer.concat(chunks).toString() || '{}') as { message?: string }
            const leaked = JSON.stringify({
              code: 401,
              message: `${body.message ?? 'unauthorized'} (key ${String(req.headers['x-api-key'])})`,
            })
            entry.bytesOut = leaked.length
            res.writeHead(401, { 'content-type': 'application/json' }).end(leaked)
          })
          return
        }
        res.writeHead(answer.statusCode ?? 502, answer.headers)
        const isCreate = req.method === 'POST' && /^\/(v2\/)?sandboxes$/.test(url.pathname)
        const kept: Buffer[] = []
        answer.on('data', (c: Buffer) => {
          entry.bytesOut += c.length
          if (isCreate) kept.push(c)
        })
        answer.on('end', () => {
          if (!isCreate) return
          try {
            entry.answer = JSON.parse(Buffer.concat(kept).toString())
          } catch {
            // not JSON: nothing to record
          }
        })
        // An answer the endpoint drops (a sandbox killed mid-command) is dropped for the client too.
        answer.on('close', () => {
          if (!answer.complete) res.destroy()
        })
        answer.pipe(res)
      },
    )
    upstream.on('error', () => res.destroy())
    // A client that goes away mid-answer (a cancelled stream) ends the upstream request too, and an
    // upstream that drops its answer (a sandbox killed mid-command) drops the client's.
    res.on('close', () => {
      entry.durationMs = performance.now() - started
      upstream.destroy()
    })
    req.on('error', () => upstream.destroy())
    if (req.method === 'POST' && !url.pathname.includes('.') && !url.pathname.startsWith('/files')) {
      const chunks: Buffer[] = []
      req.on('data', (c: Buffer) => chunks.push(c))
      req.on('end', () => {
        const raw = Buffer.concat(chunks)
        try {
          entry.body = JSON.parse(raw.toString())
        } catch {
          // not JSON: nothing to record
        }
        upstream.end(raw)
      })
    } else req.pipe(upstream)
  })
  // Host-named requests that upgrade (WebSockets to a sandbox port) pass through as raw sockets.
  proxy.on('upgrade', (req: IncomingMessage, socket: Socket, head: Buffer) => {
    const up = connect(Number(target.port), target.hostname, () => {
      const lines = [`${req.method} ${req.url} HTTP/1.1`]
      for (let i = 0; i < req.rawHeaders.length; i += 2)
        lines.push(`${req.rawHeaders[i]}: ${req.rawHeaders[i + 1]}`)
      up.write(lines.join('\r\n') + '\r\n\r\n')
      if (head.length) up.write(head)
      up.pipe(socket).pipe(up)
    })
    up.on('error', () => socket.destroy())
    socket.on('error', () => up.destroy())
  })
  proxy.on('connection', (s: Socket) => {
    sockets.add(s)
    s.on('close', () => sockets.delete(s))
  })
  proxy.keepAliveTimeout = 30_000
  await new Promise<void>((resolve, reject) => {
    proxy.once('error', reject)
    proxy.listen(0, '127.0.0.1', () => resolve())
  })
  const origin = `http://127.0.0.1:${(proxy.address() as AddressInfo).port}`
  const api = (path: string, init: RequestInit = {}): Promise<Response> =>
    fetch(server.url + path, { ...init, headers: { 'x-api-key': server.key, ...init.headers } })

  return {
    apiUrl: origin,
    sandboxUrl: origin,
    previewUrl: origin,
    domain: `localhost:${target.port}`,
    apiKey: server.key,
    scope,
    server,
    requests,
    events,
    async info(sandboxId) {
      const r = await api(`/sandboxes/${encodeURIComponent(sandboxId)}`)
      if (r.status === 404) return undefined
      if (!r.ok) throw new Error(`GET /sandboxes/${sandboxId}: ${r.status} ${await r.text()}`)
      return (await r.json()) as E2BSandboxInfo
    },
    createBody(sandboxId) {
      const create = requests.find(
        (r) => (r.answer as { sandboxID?: string } | undefined)?.sandboxID === sandboxId,
      )
      return create?.body as Record<string, unknown> | undefined
    },
    async sandboxIds() {
      const r = await api('/v2/sandboxes?limit=100')
      if (!r.ok) throw new Error(`GET /v2/sandboxes: ${r.status} ${await r.text()}`)
      return ((await r.json()) as { sandboxID: string }[]).map((s) => s.sandboxID)
    },
    async containerOf(sandboxId) {
      // The session's label is a hash of (tenant, session id = sandbox id, provider, profile).
      const session = sessionHash({ tenant: 'default', sessionId: sandboxId, providerId: 'docker', profile })
      const { stdout } = await run('docker', [
        'ps',
        '-aq',
        '--filter',
        `label=sandbox-router.scope=${scope}`,
        '--filter',
        `label=sandbox-router.session=${session}`,
      ])
      return stdout.split('\n').find(Boolean)
    },
    async timedOut(sandboxId, timeoutMs = 60_000) {
      await server.child.next(
        (l) => l.text.includes('e2b sandbox timed out') && l.text.includes(sandboxId),
        timeoutMs,
      )
    },
    async nextAnswer(match) {
      for await (const [r] of on(events, 'answered') as AsyncIterableIterator<[E2BRequest]>) {
        if (match(r)) return r
      }
      throw new Error('the proxy stopped')
    },
    containers: () => scopeContainers(scope, true),
    async close() {
      await server.stop()
      for (const s of sockets) s.destroy()
      await new Promise<void>((resolve) => proxy.close(() => resolve()))
      events.removeAllListeners()
      const left = (await scopeContainers(scope, true)).length
      await removeScope(scope)
      return left
    },
  }
}
