/**
 * A create's network rules (`allow_internet_access`, `network.allowOut` / `denyOut`) against the
 * template's profile. The profile's network is the ceiling, and a sandbox never gets more than the
 * create asked for:
 * - on a profile without network, every rule is met or exceeded by having none (the sandbox gets
 *   less than asked, never more; `getInfo().allowInternetAccess` says `false`);
 * - on a profile with a network, turning it off is applied (the session runs on the profile's
 *   network-less variant), and per-sandbox allow/deny lists, which would otherwise leave the sandbox
 *   more than it asked for, are a 400 naming what to do instead.
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
 * a 400 for per-sandbox lists on a profile with a network; `template` and `profile` name them.
 */
export function needsNoNetwork(
  req: NetworkRequest,
  network: ProfileNetwork,
  names: { template: string; profile: string },
): boolean {
  // No network at all: less than any rule asks for, never more.
  if (network === 'none') return false
  const where = `template '${names.template}' runs on profile '${names.profile}' (network: ${network})`
  const offAll = req.internet === false || (req.denyOut.includes(ALL_TRAFFIC) && req.allowOut.length === 0)
  if (req.allowOut.length > 0)
    throw new E2BApiError(
      400,
      `network.allowOut is not supported here: ${where}, and per-sandbox egress lists are not applied (the sandbox would reach more than the list); put the destinations in the profile's network.allow and map the template to it (config e2b.templates), or deny all traffic`,
    )
  const partialDeny = req.denyOut.filter((d) => d !== ALL_TRAFFIC)
  if (partialDeny.length > 0)
    throw new E2BApiError(
      400,
      `network.denyOut ${JSON.stringify(partialDeny)} is not supported here: ${where}, and per-sandbox deny lists are not applied; deny all traffic (allowInternetAccess: false) or narrow the profile's network.allow`,
    )
  return offAll
}

/**
 * `network.maskRequestHost`: the `Host` requests through the sandbox's host name carry to its ports
 * (`${PORT}` stands for the port). A host name with an optional port; 400 otherwise.
 */
export function hostMaskOf(network: Json | null | undefined): string | undefined {
  const mask = network?.['maskRequestHost']
  if (mask === undefined || mask === null) return undefined
  if (typeof mask !== 'string' || mask.length > 253 || !/^[A-Za-z0-9.${}_:[\]-]+$/.test(mask))
    throw new E2BApiError(
      400,
      'network.maskRequestHost must be a host name with an optional port, e.g. "api.example.com:${PORT}" (${PORT} stands for the port)',
    )
  return mask
}
