/**
 * E2B's REST control plane over our sessions, at the paths the pinned `e2b` SDK calls (and the v1
 * ones): create (with its lifecycle policy), list with filters, order and paging (`list-query.ts`),
 * get, kill, timeout, connect, refresh, and pause/resume (`lifecycle.ts`: where the provider can
 * freeze a sandbox and this process holds it, Docker under `sbx serve`). Metrics and network updates
 * have files of their own. The key comes as `X-API-Key` (the SDK's header) or as a bearer token; it
 * is one of our API keys, so tenants, quotas and rate limits are ours.
 */
import type { Context } from 'hono'
import type { App } from '../app.js'
import type { Principal } from '../keyring.js'
import type { E2BRouteDeps } from './deps.js'
import { E2BApiError, e2bErrorResponse } from './errors.js'
import { sandboxDomain } from './hosts.js'
import { type E2BLifecycle, lifecyclePolicyOf } from './lifecycle.js'
import { applyListQuery, parseListQuery } from './list-query.js'
import { hostMaskOf, needsNoNetwork, networkRequestOf } from './network-request.js'
import { E2BSandboxStore, type E2BSandbox } from './sandboxes.js'
import { snapshotTemplate } from './snapshot-template.js'

/** The envd version we report: the SDK enables features by it (0.6.x: octet-stream uploads, file metadata). */
export const ENVD_VERSION = '0.6.4'
/** E2B's default sandbox lifetime (s). */
const DEFAULT_TIMEOUT_S = 300
/** The longest lifetime one call may set (s): E2B's Pro tier limit, 24 h. */
const MAX_TIMEOUT_S = 86_400

type Json = Record<string, unknown>

/** Verifies the E2B API key of a control-plane request; 401 in E2B's words otherwise. */
export async function principalOf(c: Context, deps: E2BRouteDeps): Promise<Principal> {
  const bearer = /^Bearer\s+(\S+)\s*$/i.exec(c.req.header('authorization') ?? '')?.[1]
  const key = c.req.header('x-api-key') ?? bearer
  if (!key)
    throw new E2BApiError(401, 'missing API key: send X-API-Key (E2B_API_KEY) with a sandbox-router API key')
  const principal = deps.keyring.verify(key)
  if (!principal) {
    deps.logger.warn({ path: c.req.path }, 'rejected an unknown API key (E2B endpoint)')
    throw new E2BApiError(
      401,
      'Invalid API key: it matches no sandbox-router API key (apiKeys or SBX_API_KEY)',
    )
  }
  await deps.admitRequest(principal.tenant)
  return principal
}

/** The request's JSON object body (`{}` when empty); 400 otherwise. */
export async function jsonBody(c: Context): Promise<Json> {
  const raw = await c.req.text()
  if (!raw.trim()) return {}
  try {
    const parsed = JSON.parse(raw) as unknown
    if (parsed && typeof parsed === 'object' && !Array.isArray(parsed)) return parsed as Json
  } catch {
    // below
  }
  throw new E2BApiError(400, 'request body must be a JSON object')
}

function stringRecord(value: unknown, field: string): Record<string, string> {
  if (value === undefined || value === null) return {}
  if (typeof value !== 'object' || Array.isArray(value))
    throw new E2BApiError(400, `${field} must be an object of strings`)
  const out: Record<string, string> = {}
  for (const [k, v] of Object.entries(value)) {
    if (typeof v !== 'string') throw new E2BApiError(400, `${field}.${k} must be a string`)
    out[k] = v
  }
  return out
}

/** A lifetime in seconds from a body field: E2B's default when absent, 400 when out of range. */
export function timeoutSeconds(value: unknown, defaultS = DEFAULT_TIMEOUT_S): number {
  if (value === undefined || value === null) return defaultS
  if (typeof value !== 'number' || !Number.isInteger(value) || value < 0 || value > MAX_TIMEOUT_S)
    throw new E2BApiError(400, `timeout must be an integer number of seconds from 0 to ${MAX_TIMEOUT_S}`)
  return value
}

/** What create, connect and fork answer for a sandbox. */
export function sandboxJson(s: E2BSandbox, domain: string) {
  return {
    sandboxID: s.sandboxId,
    templateID: s.templateId,
    clientID: 'sandbox-router',
    envdVersion: ENVD_VERSION,
    envdAccessToken: s.accessToken,
    trafficAccessToken: s.trafficAccessToken ?? null,
    domain,
  }
}

function listedJson(s: E2BSandbox) {
  return {
    sandboxID: s.sandboxId,
    templateID: s.templateId,
    alias: s.profile,
    clientID: 'sandbox-router',
    cpuCount: 1,
    memoryMB: 512,
    diskSizeMB: 1024,
    envdVersion: ENVD_VERSION,
    metadata: s.metadata,
    startedAt: s.startedAt.toISOString(),
    endAt: s.endAt.toISOString(),
    state: s.paused ? 'paused' : 'running',
  }
}

function detailJson(s: E2BSandbox, domain: string, internet: boolean | null) {
  return {
    ...listedJson(s),
    envdAccessToken: s.accessToken,
    domain,
    allowInternetAccess: internet,
    lifecycle: { onTimeout: s.onTimeout ?? 'kill', autoResume: s.autoResume === true },
  }
}

const notFound = (id: string) =>
  new E2BApiError(404, `sandbox "${id}" doesn't exist or you don't have access to it`)

/** Registers the control-plane routes; `store` holds the E2B side of the sessions. */
export function registerControlPlane(
  app: App,
  deps: E2BRouteDeps,
  store: E2BSandboxStore,
  lifecycle: E2BLifecycle,
): void {
  const handle =
    (fn: (c: Context, p: Principal) => Promise<Response>) =>
    async (c: Context): Promise<Response> => {
      try {
        return await fn(c, await principalOf(c, deps))
      } catch (err) {
        return e2bErrorResponse(err)
      }
    }
  const domainOf = (c: Context): string => sandboxDomain(deps.e2b.domain, c.req.header('host'))
  const own = async (p: Principal, id: string): Promise<E2BSandbox> => {
    const s = await store.get(p.tenant, id)
    if (!s) throw notFound(id)
    return s
  }

  const create = handle(async (c, p) => {
    const body = await jsonBody(c)
    const templateId = typeof body.templateID === 'string' && body.templateID ? body.templateID : ''
    if (!templateId) throw new E2BApiError(400, 'templateID is required')
    // A snapshot's id or name is a template too (E2B's snapshots are templates).
    const snapshot = await snapshotTemplate(deps, p.tenant, templateId)
    const profile = snapshot?.profile ?? deps.e2b.templates[templateId]
    if (!profile) {
      const known = Object.keys(deps.e2b.templates).join(', ') || '(none)'
      throw new E2BApiError(
        404,
        `template '${templateId}' not found; known templates: ${known} (map more in config e2b.templates)`,
      )
    }
    const provider = snapshot?.provider ?? deps.e2b.providerOf(profile)
    const policy = lifecyclePolicyOf(body)
    if (policy.onTimeout === 'pause' && !deps.e2b.canPause?.(provider))
      throw new E2BApiError(
        400,
        `autoPause (lifecycle.onTimeout: 'pause') is not supported: provider '${provider}' (profile '${profile}') cannot pause sandboxes here; create without it (the sandbox is then killed at its timeout)`,
      )
    const metadata = stringRecord(body.metadata, 'metadata')
    const envVars = stringRecord(body.envVars, 'envVars')
    const timeoutS = timeoutSeconds(body.timeout)
    const network = body.network
    if (network !== undefined && network !== null && (typeof network !== 'object' || Array.isArray(network)))
      throw new E2BApiError(400, 'network must be an object')
    const publicTraffic = (network as Json | null | undefined)?.allowPublicTraffic
    if (publicTraffic !== undefined && typeof publicTraffic !== 'boolean')
      throw new E2BApiError(400, 'network.allowPublicTraffic must be a boolean')
    const maskRequestHost = hostMaskOf(network as Json | null | undefined)
    const rules = networkRequestOf(body, network as Json | null | undefined)
    let sessionProfile = profile
    if (needsNoNetwork(rules, deps.e2b.networkOf?.(profile) ?? 'none', { template: templateId, profile })) {
      const offline = deps.e2b.noNetworkProfileOf?.(profile)
      if (!offline)
        throw new E2BApiError(
          400,
          `allowInternetAccess: false cannot be honoured: profile '${profile}' has a network and no network-less variant here`,
        )
      sessionProfile = offline
    }
    const sandboxId = E2BSandboxStore.newId()
    if (snapshot) await snapshot.start(sandboxId, sessionProfile)
    else
      await deps.sessions.create(
        p.tenant,
        { id: sandboxId, provider, profile: sessionProfile },
        { admit: true },
      )
    const s = await store.add(
      sandboxId,
      {
        tenant: p.tenant,
        templateId,
        profile: sessionProfile,
        provider,
        cwd: deps.e2b.cwdOf?.(profile) ?? '/',
        metadata,
        envVars,
        publicTraffic: publicTraffic !== false,
        ...(maskRequestHost !== undefined ? { maskRequestHost } : {}),
        ...policy,
      },
      timeoutS * 1000,
    )
    deps.logger.info(
      { tenant: p.tenant, sandboxId, templateId, profile: sessionProfile },
      'e2b sandbox created',
    )
    return c.json(sandboxJson(s, domainOf(c)), 201)
  })
  app.post('/v2/sandboxes', create)
  app.post('/sandboxes', create)

  const list = (paged: boolean) =>
    handle(async (c, p) => {
      const matching = applyListQuery(
        await store.list(p.tenant),
        parseListQuery((n) => c.req.query(n)),
      )
      if (!paged) return c.json(matching.map(listedJson))
      const limitRaw = c.req.query('limit')
      const limit = limitRaw === undefined ? 100 : Number(limitRaw)
      if (!Number.isInteger(limit) || limit < 1 || limit > 100)
        throw new E2BApiError(400, 'limit must be an integer from 1 to 100')
      const token = c.req.query('nextToken')
      const offset = token === undefined || token === '' ? 0 : Number(token)
      if (!Number.isInteger(offset) || offset < 0)
        throw new E2BApiError(400, 'nextToken is not one this server gave out; list again without it')
      const page = matching.slice(offset, offset + limit)
      if (offset + limit < matching.length) c.header('x-next-token', String(offset + limit))
      return c.json(page.map(listedJson))
    })
  app.get('/v2/sandboxes', list(true))
  app.get('/sandboxes', list(false))

  for (const prefix of ['/sandboxes/:id', '/v2/sandboxes/:id']) {
    app.get(
      prefix,
      handle(async (c, p) => {
        const s = await own(p, c.req.param('id') ?? '')
        // Whether the sandbox has a network: its session's profile (the no-internet variant has none).
        let internet: boolean | null = null
        try {
          internet = (deps.e2b.networkOf?.(s.profile) ?? 'none') !== 'none'
        } catch {
          // A profile no longer configured: unknown, as E2B's null says.
        }
        return c.json(detailJson(s, domainOf(c), internet))
      }),
    )
    app.delete(
      prefix,
      handle(async (c, p) => {
        const id = c.req.param('id') ?? ''
        const s = await own(p, id)
        // A frozen sandbox is thawed first, so its processes get their signals as they end.
        if (s.paused) await lifecycle.thaw(s).catch(() => undefined)
        await store.remove(id)
        await deps.sessions.delete(p.tenant, id)
        deps.logger.info({ tenant: p.tenant, sandboxId: id }, 'e2b sandbox killed')
        return c.body(null, 204)
      }),
    )
    app.post(
      `${prefix}/timeout`,
      handle(async (c, p) => {
        const s = await own(p, c.req.param('id') ?? '')
        await store.setTimeout(s, timeoutSeconds((await jsonBody(c)).timeout) * 1000)
        return c.body(null, 204)
      }),
    )
    app.post(
      `${prefix}/refreshes`,
      handle(async (c, p) => {
        const s = await own(p, c.req.param('id') ?? '')
        const duration = (await jsonBody(c)).duration
        if (duration !== undefined) await store.setTimeout(s, timeoutSeconds(duration) * 1000)
        return c.body(null, 204)
      }),
    )
    app.post(
      `${prefix}/connect`,
      handle(async (c, p) => {
        const s = await own(p, c.req.param('id') ?? '')
        const ms = timeoutSeconds((await jsonBody(c)).timeout) * 1000
        // A paused sandbox is resumed with the new lifetime (201, as E2B answers a resume).
        if (s.paused) {
          await lifecycle.resume(s, ms)
          return c.json(sandboxJson(s, domainOf(c)), 201)
        }
        // Connect only ever extends a running sandbox's lifetime.
        if (Date.now() + ms > s.endAt.getTime()) await store.setTimeout(s, ms)
        return c.json(sandboxJson(s, domainOf(c)), 200)
      }),
    )
    app.post(
      `${prefix}/pause`,
      handle(async (c, p) => {
        const s = await own(p, c.req.param('id') ?? '')
        lifecycle.assertPausable(s, 'pause')
        const memory = (await jsonBody(c)).memory
        if (memory !== undefined && memory !== null && typeof memory !== 'boolean')
          throw new E2BApiError(400, 'memory must be a boolean (false: a filesystem-only pause)')
        // 409: the SDK reads it as "already paused" and returns false.
        if (s.paused) throw new E2BApiError(409, `sandbox ${s.sandboxId} is already paused`)
        await lifecycle.pause(s, { filesystemOnly: memory === false })
        return c.body(null, 204)
      }),
    )
    app.post(
      `${prefix}/resume`,
      handle(async (c, p) => {
        const s = await own(p, c.req.param('id') ?? '')
        lifecycle.assertPausable(s, 'resume')
        if (!s.paused) throw new E2BApiError(409, `sandbox ${s.sandboxId} is not paused`)
        await lifecycle.resume(s, timeoutSeconds((await jsonBody(c)).timeout) * 1000)
        return c.json(sandboxJson(s, domainOf(c)), 201)
      }),
    )
  }
}
