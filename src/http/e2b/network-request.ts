/**
 * A create's network rules (`allow_internet_access`, `network.allowOut` / `denyOut`) against the
 * template's profile. The profile's network is the upper bound — this server never widens it for a
 * request — so a rule that narrows it to no network is applied (the session runs on the profile's
 * network-less variant), one that asks for more than the profile gives is a 400 saying so, and
 * per-sandbox allow/deny lists, which the profile cannot express, are a 400 naming what to do
 * instead. Nothing is silently ignored.
 */
import { E2BApiError } from './errors.js'

/** The network of a profile, as far as a create's rules care. */
export type ProfileNetwork = 'none' | 'bridge' | 'allowlist'

/** E2B's "all traffic" selector (`ALL_TRAFFIC` in the SDK). */
const ALL_TRAFFIC = '0.0.0.0/0'

type Json = Record<string, unknown>

function stringList(value: unknown, field: string): string[] {
  if (value === undefined || value === null) return []
  if (!Array.isArray(value) || value.some((v) => typeof v !== 'string'))
    throw new E2BApiError(400, `${field} must be a list of strings (CIDRs, IPs or domains)`)
  return value as string[]
}

/** The rules of a create body, validated. */
export interface NetworkRequest {
  /** `allow_internet_access` as sent; undefined when the SDK left it out (its default). */
  readonly internet?: boolean
  readonly allowOut: readonly string[]
  readonly denyOut: readonly string[]
}

/** Reads the rules of a create body (400 for a wrong shape). */
export function networkRequestOf(body: Json, network: Json | null | undefined): NetworkRequest {
  const internet = body['allow_internet_access'] ?? body['allowInternetAccess']
  if (internet !== undefined && internet !== null && typeof internet !== 'boolean')
    throw new E2BApiError(400, 'allow_internet_access must be a boolean')
  return {
    ...(typeof internet === 'boolean' ? { internet } : {}),
    allowOut: stringList(network?.['allowOut'], 'network.allowOut'),
    denyOut: stringList(network?.['denyOut'], 'network.denyOut'),
  }
}

/**
 * Whether the sandbox must run without network (true), or on the profile as it is (false). Throws
 * a 400 for rules the profile cannot honour; `template` and `profile` name them in the message.
 */
export function needsNoNetwork(
  req: NetworkRequest,
  network: ProfileNetwork,
  names: { template: string; profile: string },
): boolean {
  const where = `template '${names.template}' runs on profile '${names.profile}' (network: ${network})`
  const offAll = req.internet === false || (req.denyOut.includes(ALL_TRAFFIC) && req.allowOut.length === 0)
  if (req.allowOut.length > 0)
    throw new E2BApiError(
      400,
      network === 'none'
        ? `network.allowOut cannot be honoured: ${where}, which has no network, and a create never widens it; map the template to a profile with network.allow (config e2b.templates) for these destinations`
        : `network.allowOut is not supported here: ${where}, and per-sandbox egress lists are not applied; put the destinations in the profile's network.allow and map the template to it (config e2b.templates)`,
    )
  const partialDeny = req.denyOut.filter((d) => d !== ALL_TRAFFIC)
  if (partialDeny.length > 0 && network !== 'none')
    throw new E2BApiError(
      400,
      `network.denyOut ${JSON.stringify(partialDeny)} is not supported here: ${where}, and per-sandbox deny lists are not applied; deny all traffic (allowInternetAccess: false) or narrow the profile's network.allow`,
    )
  if (req.internet === true && network === 'none')
    throw new E2BApiError(
      400,
      `allowInternetAccess cannot be honoured: ${where}, which has no network, and a create never widens it; create without allowInternetAccess, or map the template to a profile with network: bridge or network.allow (config e2b.templates)`,
    )
  return offAll && network !== 'none'
}
