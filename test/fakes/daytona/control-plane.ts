import { randomUUID } from 'node:crypto'
import type { IncomingMessage, ServerResponse } from 'node:http'
import { cpus } from 'node:os'
import type { DockerProvider } from '../../../providers/docker/index.js'
import { resolveProfile } from '../../../src/sandbox/profiles.js'
import type { Labels } from '../../../src/sandbox/types.js'
import { readJson, sendError, sendJson } from './http-util.js'
import { sendPreviewLink } from './preview.js'
import { type FakeSandboxRecord, toDto } from './records.js'

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
  const record: FakeSandboxRecord = {
    id,
    name: typeof body.name === 'string' ? body.name : id,
    labels: strings(body.labels),
    env: strings(body.env),
    state: 'started',
    cpu: num(body.cpu, 1),
    memory: num(body.memory, 1),
    disk: num(body.disk, 3),
    target: typeof body.target === 'string' ? body.target : 'us',
    public: body.public === true,
    networkBlockAll: body.networkBlockAll === true,
    ...(typeof body.networkAllowList === 'string' ? { networkAllowList: body.networkAllowList } : {}),
    autoStopInterval: num(body.autoStopInterval, 15),
    autoArchiveInterval: num(body.autoArchiveInterval, 10_080),
    autoDeleteInterval: num(body.autoDeleteInterval, -1),
    ...(typeof body.ttlMinutes === 'number' ? { ttlMinutes: body.ttlMinutes } : {}),
    ...(typeof body.snapshot === 'string' ? { snapshot: body.snapshot } : {}),
    ...(from?.[1] ? { image: from[1] } : {}),
    createdAt: now,
    updatedAt: now,
  }
  if (ctx.faults.failingStarts > 0) {
    ctx.faults.failingStarts--
    record.state = 'error'
    record.errorReason = 'fake: the runner could not start the sandbox'
    ctx.records.set(id, record)
    sendJson(res, 200, { ...toDto(record, ctx.toolboxUrl), state: 'starting', errorReason: undefined })
    return
  }
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
  })
  try {
    record.backend = await ctx.docker.create(profile, {
      labels: { ...ctx.containerLabels, 'sandbox-router.fake-sandbox': id },
    })
  } catch (err) {
    sendError(res, req, 500, `fake: cannot start the backing container: ${String(err)}`)
    return
  }
  ctx.records.set(id, record)
  sendJson(res, 200, toDto(record, ctx.toolboxUrl))
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
  sendJson(res, 200, { items: page.map((r) => toDto(r, ctx.toolboxUrl)), nextCursor: next })
}

/** Removes a record's container; the record stays as a `destroyed` tombstone unless `forget`. */
export async function destroyRecord(
  ctx: FakeContext,
  record: FakeSandboxRecord,
  forget: boolean,
): Promise<void> {
  const backend = record.backend
  record.backend = undefined
  record.state = 'destroyed'
  record.updatedAt = new Date().toISOString()
  if (forget) ctx.records.delete(record.id)
  if (backend) {
    await backend.close()
    await ctx.docker.destroy(backend.ref)
  }
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
  const dto = (): Record<string, unknown> => toDto(record, ctx.toolboxUrl)
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
      sendJson(res, 200, dto())
      return
    case 'DELETE ':
      if (record.state !== 'destroyed') await destroyRecord(ctx, record, false)
      // Like Daytona, the answer says `destroying`; the next GET says `destroyed`.
      sendJson(res, 200, { ...dto(), state: 'destroying' })
      return
    case 'GET toolbox-proxy-url':
      sendJson(res, 200, { url: ctx.toolboxUrl })
      return
    case 'POST start':
    case 'POST stop':
      if (record.state === 'destroyed') {
        sendError(res, req, 409, `Sandbox ${record.id} is destroyed`)
        return
      }
      record.state = action === 'start' ? 'started' : 'stopped'
      record.updatedAt = new Date().toISOString()
      sendJson(res, 200, dto())
      return
    default:
      sendError(res, req, 404, `fake Daytona: no route ${req.method} ${url.pathname}`)
  }
}
