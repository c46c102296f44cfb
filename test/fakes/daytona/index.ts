/**
 * A local stand-in for Daytona: the control-plane routes the SDK calls for create / get / list
 * (cursor pages) / delete / start / stop / archive, and the toolbox routes for `/process/execute`,
 * sessions (`/process/session…`, see sessions.ts) and file upload / download. Every sandbox is a
 * real Docker container made by the project's Docker provider (image `sandbox-router/base:latest`),
 * so commands really run; the daemon's behaviour the adapter relies on is kept (merged output, 408
 * with output discarded on timeout, process group kill, env-name validation, multipart downloads
 * with JSON error parts: 404 `FILE_NOT_FOUND`, 403 `FILE_ACCESS_DENIED` for a file the sandbox user
 * may not read, 400 `INVALID_FILE_PATH`, 500 `FILE_READ_FAILED`).
 *
 * The lifecycle is Daytona's (see lifecycle.ts): create answers `creating` (`pending_build` first
 * for an image) and the container starts behind the answer, so the SDK's wait runs; start, stop,
 * archive and delete pass through `starting` / `stopping` / `archiving` / `destroying` for at least
 * `transitionMs`. Auto-stop, auto-archive, auto-delete (0: deleted instead of stopped) and
 * `ttlMinutes` are enforced from the last activity, in minutes of `minuteMs` (a test makes a minute
 * last a second). A stop ends what runs (toolbox requests in flight answer 502, the processes and
 * sessions are killed) and keeps the files; the toolbox answers a sandbox that is not started 400,
 * like Daytona's runner ("Is the Sandbox started?").
 *
 * Previews (`getPreviewLink`, HTTP and WebSocket) are served under `/preview/<id>/<port>` (see preview.ts).
 *
 * Not covered: session log follow over WebSocket and session input, PTY, code-run, git, LSP, signed
 * previews, snapshots/volumes and the Socket.IO event stream (its path answers 404, so the SDK falls
 * back to polling, as on a network that blocks WebSockets), organisation quotas, rate limits other
 * than on create, and list's eventual consistency. A destroyed sandbox stays a `destroyed`
 * tombstone (Daytona answers 404). Egress is enforced: `networkBlockAll` gives the container no
 * network; a `networkAllowList` of CIDRs makes it an allowlist sandbox of the project's egress proxy
 * (HTTP and CONNECT to those addresses only).
 */
import { randomUUID } from 'node:crypto'
import { type IncomingMessage, type ServerResponse, createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import type { Duplex } from 'node:stream'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { createDockerProvider } from '../../../providers/docker/index.js'
import { EgressProxy } from '../../../src/egress/proxy.js'
import { type FakeContext, handleApi } from './control-plane.js'
import { destroyRecord, stopRecord, sweep } from './lifecycle.js'
import { sendError } from './http-util.js'
import type { FakeSandboxRecord } from './records.js'
import { handlePreview, handlePreviewUpgrade, isPreview } from './preview.js'
import { FakeSessions } from './sessions.js'
import { type SentBytes, type Timings, handleToolbox } from './toolbox.js'

/** Label on every container of the fake (value `daytona`), for cleanup by tests. */
export const FAKE_LABEL = 'sandbox-router.fake'
/** Label carrying the id of one fake server instance. */
export const FAKE_RUN_LABEL = 'sandbox-router.fake-run'

/** Options of {@link startFakeDaytona}. */
export interface FakeDaytonaOptions {
  /** The key the fake accepts. @default a random one */
  apiKey?: string
  /** Image of the backing containers. @default 'sandbox-router/base:latest' */
  image?: string
  /** Items per list page (small, so the SDK's cursor loop is exercised). @default 3 */
  listPageSize?: number
  /**
   * The fake's time scale: how long one of Daytona's minutes lasts (ms), the unit of
   * `autoStopInterval`, `autoArchiveInterval`, `autoDeleteInterval` and `ttlMinutes`. The lifetime
   * sweep runs every `minuteMs / 6` (Daytona: every 10 s). Keep it above the SDK's state-poll
   * interval (1 s with event streaming on, as the provider's default; 100 ms in polling mode): a
   * sandbox auto-stopped before the SDK saw it `started` leaves the SDK waiting to its timeout.
   * @default 60000
   */
  minuteMs?: number
  /** The shortest time a state change takes, so transient states are observable (ms). @default 150 */
  transitionMs?: number
  /**
   * Whether daemon errors carry `source: 'DAYTONA_DAEMON'`, as current daemons send (the SDK then
   * raises e.g. `DaytonaFileAccessDeniedError`); false: the v0.190.0 daemon's shape without it (the
   * SDK raises by status, e.g. `DaytonaAuthorizationError` for 403). @default true
   */
  daemonErrorSource?: boolean
}

/** A view of one fake sandbox, for assertions. */
export type FakeSandboxView = Omit<FakeSandboxRecord, 'backend'> & { containerId?: string }

/** Fault injection. */
export interface FakeDaytonaFaults {
  /** The next `count` creates answer 429 with `Retry-After-Sandbox-Create: retryAfterSec`. */
  rateLimitCreates(count: number, retryAfterSec?: number): void
  /**
   * From now on, `share` (0–1) of creates answer 429, spread evenly (0.5: every second one), until
   * set to 0; retries are creates too, so they are refused at the same rate.
   */
  rateLimitShare(share: number, retryAfterSec?: number): void
  /** Removes the sandbox and its container behind the client's back: every later call gets 404. */
  vanish(sandboxId: string): Promise<void>
  /**
   * Stops the sandbox behind the client's back (as a stop from the dashboard would): `stopping` at
   * once (toolbox requests in flight answer 502, new ones 400), the processes killed, then `stopped`.
   * Resolves once it is `stopped`.
   */
  stop(sandboxId: string): Promise<void>
  /** Whether a 401 quotes the presented bearer token back (to test that it never leaks further). */
  echoCredentialsOn401(on: boolean): void
  /** The next `count` creates answer `starting`, then the sandbox turns to `error` (a failed start). */
  failStarts(count: number): void
}

/** A running fake. */
export interface FakeDaytona {
  /** Base URL of the server. */
  url: string
  /** What the SDK takes as `apiUrl` (`{url}/api`). */
  apiUrl: string
  /** The accepted API key. */
  apiKey: string
  faults: FakeDaytonaFaults
  /** Sandboxes known to the fake (destroyed ones stay as tombstones until vanished), with their state history. */
  sandboxes(): FakeSandboxView[]
  /** Ids of the live backing containers. */
  containers(): string[]
  /** Handling time of each toolbox route (ms), e.g. `timings.get('POST /process/execute')`. */
  timings: Timings
  /**
   * Response body bytes the toolbox sent per route (session routes by shape, ids as `{id}`), e.g.
   * `sentBytes.get('GET /process/session/{id}/command/{id}/logs')`.
   */
  sentBytes: SentBytes
  /** Removes every container and stops the server. */
  close(): Promise<void>
}

/** Starts the fake on 127.0.0.1 (a free port). */
export async function startFakeDaytona(options: FakeDaytonaOptions = {}): Promise<FakeDaytona> {
  const runId = randomUUID()
  const apiKey = options.apiKey ?? `fake-daytona-${randomUUID()}`
  // Enforces a sandbox's networkAllowList with the project's egress proxy (address rules only).
  const egressProxy = new EgressProxy()
  const docker = createDockerProvider({
    instanceId: `fake-daytona-${runId}`,
    egress: { proxy: egressProxy, socketDir: join(tmpdir(), `sbx-fake-daytona-${runId.slice(0, 8)}`) },
  })
  const timings: Timings = new Map()
  const sentBytes: SentBytes = new Map()
  const minuteMs = options.minuteMs ?? 60_000
  const ctx: FakeContext = {
    apiKey,
    records: new Map(),
    docker,
    image: options.image ?? 'sandbox-router/base:latest',
    toolboxUrl: '',
    origin: '',
    pageSize: options.listPageSize ?? 3,
    faults: {
      rateLimitedCreates: 0,
      rateLimitShare: 0,
      sharedCreates: 0,
      retryAfterSec: 7,
      echoCredentialsOn401: false,
      failingStarts: 0,
    },
    containerLabels: { [FAKE_LABEL]: 'daytona', [FAKE_RUN_LABEL]: runId },
    minuteMs,
    transitionMs: options.transitionMs ?? 150,
    daemonErrorSource: options.daemonErrorSource ?? true,
    sessions: new FakeSessions(),
    inflight: new Map(),
    pending: new Set(),
  }
  const sweeper = setInterval(() => sweep(ctx, Date.now()), Math.min(Math.max(minuteMs / 6, 20), 10_000))
  sweeper.unref()

  const authorised = (req: IncomingMessage, res: ServerResponse): boolean => {
    const header = req.headers.authorization ?? ''
    if (header === `Bearer ${apiKey}`) return true
    const quoted = ctx.faults.echoCredentialsOn401 ? ` (got '${header}')` : ''
    sendError(res, req, 401, `Unauthorized: invalid API key${quoted}`)
    return false
  }

  const route = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    const url = new URL(req.url ?? '/', 'http://fake')
    if (url.pathname.startsWith('/api/socket.io')) {
      sendError(res, req, 404, 'event stream not available in the fake')
      return
    }
    if (isPreview(req)) return handlePreview(ctx, req, res)
    if (!authorised(req, res)) return
    if (url.pathname.startsWith('/api/')) return handleApi(ctx, req, res, url)
    if (url.pathname.startsWith('/toolbox/')) return handleToolbox(ctx, req, res, url, timings, sentBytes)
    sendError(res, req, 404, `fake Daytona: no route ${req.method} ${url.pathname}`)
  }

  const server = createServer((req, res) => {
    // A client that resets mid-request (a worker killed or stopped mid-poll) is not the fake's failure.
    req.on('error', () => res.destroy())
    res.on('error', () => undefined)
    route(req, res).catch((err: unknown) => {
      if (!res.headersSent)
        sendError(res, req, 500, `fake Daytona: ${err instanceof Error ? err.message : String(err)}`)
      else res.destroy()
    })
  })
  // WebSocket upgrades: the preview proxy relays them; others (the SDK's Socket.IO event stream)
  // are refused like a proxy without WS.
  server.on('upgrade', (req: IncomingMessage, socket: Duplex, head: Buffer) => {
    // The server gives an upgraded socket no error listener: a client that resets it (the SDK's
    // Socket.IO client giving up on the refused event stream) would be an uncaught ECONNRESET.
    socket.on('error', () => socket.destroy())
    if (isPreview(req)) {
      void handlePreviewUpgrade(ctx, req, socket, head).catch(() => socket.destroy())
      return
    }
    socket.end('HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n')
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
  ctx.toolboxUrl = `${url}/toolbox`
  ctx.origin = url

  const find = (id: string): FakeSandboxRecord => {
    const record = ctx.records.get(id)
    if (!record) throw new Error(`fake Daytona: no sandbox ${id}`)
    return record
  }

  return {
    url,
    apiUrl: `${url}/api`,
    apiKey,
    timings,
    sentBytes,
    faults: {
      rateLimitCreates(count, retryAfterSec = 7) {
        ctx.faults.rateLimitedCreates = count
        ctx.faults.retryAfterSec = retryAfterSec
      },
      rateLimitShare(share, retryAfterSec = 7) {
        ctx.faults.rateLimitShare = Math.min(Math.max(share, 0), 1)
        ctx.faults.sharedCreates = 0
        ctx.faults.retryAfterSec = retryAfterSec
      },
      vanish: (id) => destroyRecord(ctx, find(id), true),
      stop(id) {
        const record = find(id)
        return record.state === 'started' ? stopRecord(ctx, record) : Promise.resolve()
      },
      echoCredentialsOn401(on) {
        ctx.faults.echoCredentialsOn401 = on
      },
      failStarts(count) {
        ctx.faults.failingStarts = count
      },
    },
    sandboxes: () =>
      [...ctx.records.values()].map(({ backend, ...rest }) => ({
        ...rest,
        ...(backend ? { containerId: backend.ref.id } : {}),
      })),
    containers: () => [...ctx.records.values()].flatMap((r) => (r.backend ? [r.backend.ref.id] : [])),
    async close() {
      clearInterval(sweeper)
      server.closeAllConnections()
      await new Promise<void>((resolve) => server.close(() => resolve()))
      // Creates and deletes still running finish first (a container being made is then removed too).
      while (ctx.pending.size > 0) await Promise.all(ctx.pending)
      await Promise.all([...ctx.records.values()].map((r) => destroyRecord(ctx, r, true)))
      // Anything a crashed handler left behind.
      for (const ref of await docker.list({ labels: { [FAKE_RUN_LABEL]: runId } })) await docker.destroy(ref)
      await docker.close()
      await egressProxy.closeAll()
    },
  }
}
