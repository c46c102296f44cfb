/**
 * The fake E2B REST control plane: the endpoints e2b@2.51.0 calls for create, connect, list, info,
 * timeout, pause and kill, with E2B's JSON shapes (`{ code, message }` errors, `x-next-token`
 * pagination, the doubly URL-encoded `metadata` filter).
 */
import type { IncomingMessage, ServerResponse } from 'node:http'
import { readBody } from './connect-rpc.js'
import type { FakeSandbox, SandboxStore } from './sandboxes.js'

/** A create failure queued by a test. */
export interface CreateFault {
  status: number
  /** Sent as `Retry-After` (seconds); the SDK retries a 429 only when it is present. */
  retryAfterS?: number
}

/** What the API routes need from the fake server. */
export interface ApiContext {
  store: SandboxStore
  apiKey: string
  image: string
  envdVersion: string
  /** Templates that exist; any template is accepted when undefined. */
  templates: ReadonlySet<string> | undefined
  /** Largest page `GET /v2/sandboxes` returns, whatever `limit` asks. */
  maxPageSize: number
  /** Echo the key a request sent in 401 messages (to test that adapters redact it). */
  leakKeyInErrors: boolean
  createFaults: CreateFault[]
}

class ApiError extends Error {
  constructor(
    readonly status: number,
    message: string,
    readonly headers: Record<string, string> = {},
  ) {
    super(message)
  }
}

function send(
  res: ServerResponse,
  status: number,
  body?: unknown,
  headers: Record<string, string> = {},
): void {
  if (body === undefined) {
    res.writeHead(status, headers)
    res.end()
    return
  }
  const data = Buffer.from(JSON.stringify(body), 'utf8')
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': data.length, ...headers })
  res.end(data)
}

async function jsonBody(req: IncomingMessage): Promise<Record<string, unknown>> {
  const raw = (await readBody(req)).toString('utf8')
  if (!raw) return {}
  try {
    const parsed = JSON.parse(raw) as unknown
    if (parsed && typeof parsed === 'object' && !Array.isArray(parsed))
      return parsed as Record<string, unknown>
  } catch {
    // fall through
  }
  throw new ApiError(400, 'request body must be a JSON object')
}

function stringRecord(value: unknown): Record<string, string> {
  if (value === undefined || value === null) return {}
  if (typeof value !== 'object' || Array.isArray(value))
    throw new ApiError(400, 'expected an object of strings')
  const out: Record<string, string> = {}
  for (const [k, v] of Object.entries(value)) {
    if (typeof v !== 'string') throw new ApiError(400, `value of ${k} must be a string`)
    out[k] = v
  }
  return out
}

function seconds(value: unknown, fallback: number): number {
  if (value === undefined) return fallback
  if (typeof value !== 'number' || !Number.isInteger(value) || value < 0) {
    throw new ApiError(400, 'timeout must be a non-negative integer (seconds)')
  }
  return value
}

function sandboxJson(ctx: ApiContext, s: FakeSandbox) {
  return {
    sandboxID: s.sandboxId,
    templateID: s.templateId,
    clientID: 'fake',
    envdVersion: ctx.envdVersion,
    envdAccessToken: s.envdAccessToken,
    trafficAccessToken: s.trafficAccessToken ?? null,
    domain: null,
  }
}

function listedJson(ctx: ApiContext, s: FakeSandbox) {
  return {
    sandboxID: s.sandboxId,
    templateID: s.templateId,
    clientID: 'fake',
    cpuCount: 2,
    memoryMB: 512,
    diskSizeMB: 1024,
    envdVersion: ctx.envdVersion,
    metadata: s.metadata,
    startedAt: s.startedAt.toISOString(),
    endAt: s.endAt.toISOString(),
    state: s.state,
  }
}

function detailJson(ctx: ApiContext, s: FakeSandbox) {
  return {
    ...listedJson(ctx, s),
    envdAccessToken: s.envdAccessToken,
    domain: null,
    allowInternetAccess: s.allowInternetAccess ?? null,
    ...(s.allowOut || s.denyOut
      ? {
          network: {
            ...(s.allowOut ? { allowOut: s.allowOut } : {}),
            ...(s.denyOut ? { denyOut: s.denyOut } : {}),
          },
        }
      : {}),
    lifecycle: { onTimeout: s.autoPause ? 'pause' : 'kill', autoResume: false },
  }
}

function notFound(id: string): ApiError {
  return new ApiError(404, `sandbox "${id}" doesn't exist or you don't have access to it`)
}

/** Parses the `metadata` query: `k=v&…` URL-encoded once more by the SDK (`encodeURIComponent` on each side). */
function metadataFilter(raw: string | null): Record<string, string> {
  const filter: Record<string, string> = {}
  if (!raw) return filter
  for (const [k, v] of new URLSearchParams(raw)) filter[decodeURIComponent(k)] = decodeURIComponent(v)
  return filter
}

const network = (body: Record<string, unknown>): Record<string, unknown> =>
  typeof body.network === 'object' && body.network !== null ? (body.network as Record<string, unknown>) : {}

/** `{ [key]: value }` when `value` is an array of strings, else `{}`. */
function strings<K extends string>(key: K, value: unknown): Partial<Record<K, string[]>> {
  return Array.isArray(value) && value.every((v) => typeof v === 'string')
    ? ({ [key]: value } as Partial<Record<K, string[]>>)
    : {}
}

async function createSandbox(ctx: ApiContext, req: IncomingMessage, res: ServerResponse): Promise<void> {
  const body = await jsonBody(req)
  const fault = ctx.createFaults.shift()
  if (fault) {
    const headers: Record<string, string> =
      fault.retryAfterS === undefined ? {} : { 'retry-after': String(fault.retryAfterS) }
    const message =
      fault.status === 429
        ? 'You have reached the maximum number of concurrent E2B sandboxes (20). Please contact us to raise the limit.'
        : `injected failure (${fault.status})`
    throw new ApiError(fault.status, message, headers)
  }
  const templateId = typeof body.templateID === 'string' ? body.templateID : ''
  if (!templateId) throw new ApiError(400, 'templateID is required')
  if (ctx.templates && !ctx.templates.has(templateId)) {
    throw new ApiError(404, `template '${templateId}' not found`)
  }
  const sandbox = await ctx.store.create({
    templateId,
    image: ctx.image,
    metadata: stringRecord(body.metadata),
    envVars: stringRecord(body.envVars),
    timeoutMs: seconds(body.timeout, 300) * 1000,
    autoPause: body.autoPause === true,
    allowInternetAccess:
      typeof body.allow_internet_access === 'boolean' ? body.allow_internet_access : undefined,
    ...(network(body).allowPublicTraffic === false ? { allowPublicTraffic: false } : {}),
    ...strings('allowOut', network(body).allowOut),
    ...strings('denyOut', network(body).denyOut),
  })
  send(res, 201, sandboxJson(ctx, sandbox))
}

function listSandboxes(ctx: ApiContext, url: URL, res: ServerResponse): void {
  const filter = metadataFilter(url.searchParams.get('metadata'))
  const states = (url.searchParams.get('state') ?? 'running,paused').split(',')
  const limit = Math.min(Number(url.searchParams.get('limit') ?? 100) || 100, ctx.maxPageSize)
  const offset = Number(url.searchParams.get('nextToken') ?? 0) || 0
  const matching = ctx.store
    .all()
    .filter((s) => s.state !== 'killed' && states.includes(s.state))
    .filter((s) => Object.entries(filter).every(([k, v]) => s.metadata[k] === v))
    .reverse()
  const page = matching.slice(offset, offset + limit)
  const headers: Record<string, string> =
    offset + limit < matching.length ? { 'x-next-token': String(offset + limit) } : {}
  send(
    res,
    200,
    page.map((s) => listedJson(ctx, s)),
    headers,
  )
}

async function connectSandbox(ctx: ApiContext, s: FakeSandbox, req: IncomingMessage, res: ServerResponse) {
  const body = await jsonBody(req)
  const wasPaused = s.state === 'paused'
  await ctx.store.resume(s)
  const ms = seconds(body.timeout, 300) * 1000
  // A running sandbox's lifetime is only ever extended by connect.
  if (wasPaused || Date.now() + ms > s.endAt.getTime()) {
    ctx.store.updateLifetime(s, ms)
  }
  send(res, wasPaused ? 201 : 200, sandboxJson(ctx, s))
}

/** Routes one control-plane request; `url` is already parsed. */
export async function handleApi(
  ctx: ApiContext,
  req: IncomingMessage,
  res: ServerResponse,
  url: URL,
): Promise<void> {
  try {
    const key = req.headers['x-api-key']
    if (key !== ctx.apiKey) {
      const shown = ctx.leakKeyInErrors && typeof key === 'string' ? ` ${key}` : ''
      throw new ApiError(401, `Invalid API key${shown}, please visit https://e2b.dev/docs/api-key`)
    }
    const path = url.pathname
    const method = req.method ?? 'GET'
    if ((path === '/v2/sandboxes' || path === '/sandboxes') && method === 'POST') {
      return await createSandbox(ctx, req, res)
    }
    if (path === '/v2/sandboxes' && method === 'GET') return listSandboxes(ctx, url, res)
    const m = /^\/(?:v2\/)?sandboxes\/([^/]+)(?:\/([a-z]+))?$/.exec(path)
    if (!m?.[1]) throw new ApiError(404, `no route for ${method} ${path}`)
    const id = decodeURIComponent(m[1])
    const action = m[2]
    const sandbox = ctx.store.get(id)
    if (!sandbox) throw notFound(id)
    if (!action && method === 'GET') return send(res, 200, detailJson(ctx, sandbox))
    if (!action && method === 'DELETE') {
      await ctx.store.kill(sandbox, 'api')
      return send(res, 204)
    }
    if (action === 'timeout' && method === 'POST') {
      const body = await jsonBody(req)
      ctx.store.updateLifetime(sandbox, seconds(body.timeout, 15) * 1000)
      return send(res, 204)
    }
    if (action === 'connect' && method === 'POST') return await connectSandbox(ctx, sandbox, req, res)
    if (action === 'pause' && method === 'POST') {
      if (sandbox.state === 'paused') throw new ApiError(409, 'sandbox is already paused')
      sandbox.state = 'paused'
      await sandbox.container.pause()
      return send(res, 204)
    }
    throw new ApiError(404, `no route for ${method} ${path}`)
  } catch (err) {
    if (err instanceof ApiError)
      return send(res, err.status, { code: err.status, message: err.message }, err.headers)
    const message = err instanceof Error ? err.message : String(err)
    send(res, 500, { code: 500, message: `fake E2B API failure: ${message}` })
  }
}
