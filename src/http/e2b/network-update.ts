/**
 * E2B's network update of a running sandbox (`PUT /sandboxes/{id}/network`, the SDK's
 * `updateNetwork`): the body replaces the sandbox's egress rules (`allowOut`, `denyOut`,
 * `allow_internet_access`; an omitted field is cleared). The rules are checked as create checks them
 * (`network-request.ts`) against the template's profile, the ceiling: on a profile without network
 * every update is met by having none; on one with a network, per-sandbox lists are a 400, and an
 * update that would turn the network on or off is a 409, since a running sandbox keeps the network
 * it was created on here (create a new one with the rules instead).
 */
import type { App } from '../app.js'
import { principalOf } from './control-plane.js'
import type { E2BRouteDeps } from './deps.js'
import { E2BApiError, e2bErrorResponse } from './errors.js'
import { needsNoNetwork, networkRequestOf } from './network-request.js'
import type { E2BSandboxStore } from './sandboxes.js'

type Json = Record<string, unknown>

async function bodyOf(req: Request): Promise<Json> {
  const raw = await req.text()
  if (!raw.trim()) return {}
  try {
    const parsed = JSON.parse(raw) as unknown
    if (parsed && typeof parsed === 'object' && !Array.isArray(parsed)) return parsed as Json
  } catch {
    // below
  }
  throw new E2BApiError(400, 'request body must be a JSON object (SandboxNetworkUpdateConfig)')
}

/** Registers `PUT /sandboxes/{id}/network`. */
export function registerNetworkUpdate(app: App, deps: E2BRouteDeps, store: E2BSandboxStore): void {
  app.put('/sandboxes/:id/network', async (c) => {
    try {
      const p = await principalOf(c, deps)
      const id = c.req.param('id')
      const s = await store.get(p.tenant, id)
      if (!s) throw new E2BApiError(404, `sandbox "${id}" doesn't exist or you don't have access to it`)
      const body = await bodyOf(c.req.raw)
      const rules = networkRequestOf(body, body)
      const profile = deps.e2b.templates[s.templateId] ?? s.profile
      const network = deps.e2b.networkOf?.(profile) ?? 'none'
      const names = { template: s.templateId, profile }
      const extras = ['rules', 'egressProxy'].filter(
        (k) => body[k] !== undefined && body[k] !== null && Object.keys(body[k] as Json).length > 0,
      )
      if (network !== 'none' && extras.length > 0)
        throw new E2BApiError(
          400,
          `network.${extras.join(' and network.')} ${extras.length > 1 ? 'are' : 'is'} not supported here: template '${names.template}' runs on profile '${profile}' (network: ${network}); broker credentials with the profile's network.allow rules instead (docs/egress.md)`,
        )
      const wantsNone = needsNoNetwork(rules, network, names)
      const hasNone = s.profile !== profile
      if (network !== 'none' && wantsNone !== hasNone)
        throw new E2BApiError(
          409,
          `sandbox ${s.sandboxId} runs ${hasNone ? 'without a network' : `on profile '${profile}' (network: ${network})`}, and a running sandbox keeps the network it was created with here; ` +
            `create a new sandbox with ${wantsNone ? 'allowInternetAccess: false' : 'the default network'} instead`,
        )
      deps.logger.info({ tenant: s.tenant, sandboxId: s.sandboxId, network }, 'e2b sandbox network updated')
      return c.body(null, 204)
    } catch (err) {
      return e2bErrorResponse(err)
    }
  })
}
