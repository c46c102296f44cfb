import { randomUUID } from 'node:crypto'
import type { IncomingMessage, ServerResponse } from 'node:http'
import { cpus } from 'node:os'
import type { DockerProvider } from '../../../providers/docker/index.js'
import { resolveProfile } from '../../../src/sandbox/profiles.js'
import type { Labels } from '../../../src/sandbox/types.js'
import { readJson, sendError, sendJson } from './http-util.js'
import { sendPreviewLink } from './preview.js'
import { type FakeSandboxRecord, toDto } from './records.js'
import {
  MAX_AUTO_ARCHIVE_MINUTES,
  SANDBOX_USER,
  archiveRecord,
  deleteRecord,
  enqueue,
  isBusy,
  setState,
  startRecord,
  stopRecord,
  touch,
} from './lifecycle.js'
import type { FakeSessions } from './sessions.js'

/** Fault switches the tests flip (see `FakeDaytona.faults`). */
export interface FaultState {
  /** Creates still to refuse with 429. */
  rateLimitedCreates: number
  /** Share of creates (0–1) to refuse with 429, spread evenly; 0: off. */
  rateLimitShare: number
  /** Creates seen since `rateLimitShare` was set. */
  sharedCreates: number
  retryAfterSec: number
  /** Whether a 401 quotes the presented credentials back (a careless server). */
  echoCredentialsOn401: boolean
  /** Creates still to accept as `starting` and then fail (state `error`), like a broken runner. */
  failingStarts: number
}

/** State shared by the fake's handlers. */
export interface FakeContext {
  apiKey: string
  records: Map<string, FakeSandboxRecord>
  docker: DockerProvider
  image: string
  toolboxUrl: string
  /** The fake's own origin (preview links point under it). */
  origin: string
  pageSize: number
  faults: FaultState
  /** Labels on every backing container (for cleanup by tests). */
  containerLabels: Labels
  /** How long one of Daytona's minutes (the lifetime intervals' unit) lasts in the fake (ms). */
  minuteMs: number
  /** The shortest time a state change takes (its transient state shows that long at least), ms. */
  transitionMs: number
  /** Whether daemon errors carry `source: 'DAYTONA_DAEMON'` (current daemons; v0.190.0 sent none). */
  daemonErrorSource: boolean
  /** The toolbox sessions of every sandbox. */
  sessions: FakeSessions
  /** Toolbox requests in flight, per sandbox (a stop or delete answers them 502). */
  inflight: Map<string, Set<{ req: IncomingMessage; res: ServerResponse }>>
  /** State changes still running (`close()` waits for them). */
  pending: Set<Promise<void>>
}

type Body = Record<string, unknown>

const num = (v: unknown, fallback: number): number =>
  typeof v === 'number' && Number.isFinite(v) ? v : fallback
const strings = (v: unknown): Record<string, string> =>
  Object.fromEntries(
    Object.entries(typeof v === 'object' && v !== null ? (v as Record<string, unknown>) : {}).filter(
      (e): e is [string, string] => typeof e[1] === 'string',
    ),
  )

/** Whether this create is one of the `rateLimitShare` to refuse (every 1/share-th, deterministic). */
function refusedByShare(f: FaultState): boolean {
  if (f.rateLimitShare <= 0) return false
  const n = f.sharedCreates++
  return Math.floor((n + 1) * f.rateLimitShare) > Math.floor(n * f.rateLimitShare)
}

async function createSandbox(ctx: FakeContext, req: IncomingMessage, res: ServerResponse): Promise<void> {
  if (ctx.faults.rateLimitedCreates > 0 || refusedByShare(ctx.faults)) {
    if (ctx.faults.rateLimitedCreates > 0) ctx.faults.rateLimitedCreates--
    const after = String(ctx.faults.retryAfterSec)
    sendError(res, req, 429, 'Rate limit exceeded', {
      headers: {
        'x-ratelimit-limit-sandbox-create': '300',
        'x-ratelimit-remaining-sandbox-create': '0',
        'x-ratelimit-reset-sandbox-create': after,
        'retry-after-sandbox-create': after,
      },
    })
    return
  }
  const body = ((await readJson(req)) ?? {}) as Body
  const id = randomUUID()
  const now = new Date().toISOString()
  const from = /^FROM\s+(\S+)/m.exec(String((body.buildInfo as Body | undefined)?.dockerfileContent ?? ''))
  const autoArchive = num(body.autoArchiveInterval, 10_080)
  // An image is built into a snapshot first (`pending_build`); a snapshot is created at once.
  const initial = from ? 'pending_build' : 'creating'
  const record: FakeSandboxRecord = {
    id,
    name: typeof body.name === 'string' ? body.name : id,
    labels: strings(body.labels),
    env: strings(body.env),
    state: initial,
    history: [initial],
    cpu: num(body.cpu, 1),
    memory: num(body.memory, 1),
    disk: num(body.disk, 3),
    target: typeof body.target === 'string' ? body.target : 'us',
    public: body.public === true,
    networkBlockAll: body.networkBlockAll === true,
    ...(typeof body.networkAllowList === 'string' ? { networkAllowList: body.networkAllowList } : {}),
    autoStopInterval: num(body.autoStopInterval, 15),
    autoArchiveInterval:
      autoArchive === 0 ? MAX_AUTO_ARCHIVE_MINUTES : Math.min(autoArchive, MAX_AUTO_ARCHIVE_MINUTES),
    autoDeleteInterval: num(body.autoDeleteInterval, -1),
    ...(typeof body.ttlMinutes === 'number' ? { ttlMinutes: body.ttlMinutes } : {}),
    ...(typeof body.snapshot === 'string' ? { snapshot: body.snapshot } : {}),
    ...(from?.[1] ? { image: from[1] } : {}),
    createdAt: now,
    updatedAt: now,
    lastActivityAt: Date.now(),
    openRequests: 0,
  }
  ctx.records.set(id, record)
  if (ctx.faults.failingStarts > 0) {
    ctx.faults.failingStarts--
    setState(record, 'starting')
    sendJson(res, 200, dto(ctx, record))
    void enqueue(ctx, record, async () => {
      await new Promise((resolve) => setTimeout(resolve, ctx.transitionMs))
      record.errorReason = 'fake: the runner could not start the sandbox'
      if (record.state === 'starting') setState(record, 'error')
    })
    return
  }
  sendJson(res, 200, dto(ctx, record))
  // The container starts behind the answer; the SDK waits (polling GET) until the state is `started`.
  void enqueue(ctx, record, () => startContainer(ctx, record))
}

/** The DTO of a record. */
const dto = (ctx: FakeContext, record: FakeSandboxRecord): Record<string, unknown> =>
  toDto(record, ctx.toolboxUrl, ctx.minuteMs)

/** The create behind `creating` (after `pending_build` for an image): a real container, then `started`. */
async function startContainer(ctx: FakeContext, record: FakeSandboxRecord): Promise<void> {
  const pause = (): Promise<void> => new Promise((resolve) => setTimeout(resolve, ctx.transitionMs))
  if (record.state === 'pending_build') {
    await pause()
    if (record.state !== 'pending_build') return
    setState(record, 'creating')
  }
  if (record.state !== 'creating') return
  const profile = resolveProfile('fake-daytona', {
    provider: 'docker',
    image: ctx.image,
    env: record.env,
    cpu: Math.min(record.cpu, cpus().length),
    memoryMb: record.memory * 1024,
    network: record.networkBlockAll
      ? 'none'
      : record.networkAllowList
        ? { allow: record.networkAllowList.split(',').map((c) => c.trim()) }
        : 'bridge',
    maxConcurrentExecs: 64,
    readOnlyRoot: false,
    pidsLimit: 1024,
    user: SANDBOX_USER,
    // The container's agent ends it after this long with nothing attached (a stopped fake sandbox
    // has nothing attached): far beyond any test.
    idleTtlMs: 7 * 24 * 60 * 60 * 1000,
  })
  try {
    const [backend] = await Promise.all([
      ctx.docker.create(profile, {
        labels: { ...ctx.containerLabels, 'sandbox-router.fake-sandbox': record.id },
      }),
      pause(),
    ])
    if (record.state !== 'creating' || !ctx.records.has(record.id)) {
      // Vanished or destroyed while it was being made.
      await backend.close()
      await ctx.docker.destroy(backend.ref)
      return
    }
    record.backend = backend
    touch(record)
    setState(record, 'started')
  } catch (err) {
    record.errorReason = `fake: cannot start the backing container: ${String(err)}`
    if (record.state === 'creating') setState(record, 'error')
  }
}

function listSandboxes(ctx: FakeContext, url: URL, res: ServerResponse): void {
  let wanted: Record<string, string> = {}
  const labels = url.searchParams.get('labels')
  if (labels) wanted = strings(JSON.parse(labels))
  const all = [...ctx.records.values()].filter(
    (r) => r.state !== 'destroyed' && Object.entries(wanted).every(([k, v]) => r.labels[k] === v),
  )
  const limit = Math.max(1, Number(url.searchParams.get('limit') ?? ctx.pageSize) || ctx.pageSize)
  const from = Number(url.searchParams.get('cursor') ?? 0) || 0
  const page = all.slice(from, from + limit)
  const next = from + limit < all.length ? String(from + limit) : null
  sendJson(res, 200, { items: page.map((r) => dto(ctx, r)), nextCursor: next })
}

/** `POST start|stop|archive`: a transient state at once, the target state after the change. */
function changeState(
  ctx: FakeContext,
  record: FakeSandboxRecord,
  action: 'start' | 'stop' | 'archive',
  req: IncomingMessage,
  res: ServerResponse,
): void {
  const { state } = record
  const target = action === 'start' ? 'started' : action === 'stop' ? 'stopped' : 'archived'
  if (state === target || (action === 'stop' && state === 'archived')) {
    sendJson(res, 200, dto(ctx, record))
    return
  }
  const from: Record<typeof action, string[]> = {
    start: ['stopped', 'archived'],
    stop: ['started'],
    archive: ['stopped'],
  }
  if (!from[action].includes(state) || isBusy(record)) {
    sendError(res, req, 409, `Sandbox ${record.id} is ${state}: cannot ${action} it now`)
    return
  }
  if (action === 'start') void startRecord(ctx, record)
  else if (action === 'stop') void stopRecord(ctx, record)
  else void archiveRecord(ctx, record)
  sendJson(res, 200, dto(ctx, record))
}

/** Routes `/api/...` (the control plane). */
export async function handleApi(
  ctx: FakeContext,
  req: IncomingMessage,
  res: ServerResponse,
  url: URL,
): Promise<void> {
  const segments = url.pathname.split('/').filter(Boolean).slice(1) // drop 'api'
  const [resource, idOrName, action] = segments
  if (resource !== 'sandbox') {
    sendError(res, req, 404, `fake Daytona: no route ${req.method} ${url.pathname}`)
    return
  }
  if (!idOrName) {
    if (req.method === 'POST') return createSandbox(ctx, req, res)
    if (req.method === 'GET') return listSandboxes(ctx, url, res)
  }
  const record = [...ctx.records.values()].find((r) => r.id === idOrName || r.name === idOrName)
  if (!record) {
    sendError(res, req, 404, `Sandbox with ID or name ${idOrName} not found`)
    return
  }
  const port = Number(segments[3])
  if (
    req.method === 'GET' &&
    action === 'ports' &&
    segments[4] === 'preview-url' &&
    port >= 1 &&
    port <= 65535
  )
    return sendPreviewLink(ctx, record, port, res)
  const key = `${req.method} ${action ?? ''}`
  switch (key) {
    case 'GET ':
      sendJson(res, 200, dto(ctx, record))
      return
    case 'DELETE ':
      // Like Daytona, the answer says `destroying`; a later GET says `destroyed`.
      if (record.state !== 'destroyed' && record.state !== 'destroying') void deleteRecord(ctx, record)
      sendJson(res, 200, dto(ctx, record))
      return
    case 'GET toolbox-proxy-url':
      sendJson(res, 200, { url: ctx.toolboxUrl })
      return
    case 'POST start':
    case 'POST stop':
    case 'POST archive':
      return changeState(ctx, record, action as 'start' | 'stop' | 'archive', req, res)
    default:
      sendError(res, req, 404, `fake Daytona: no route ${req.method} ${url.pathname}`)
  }
}
