import type { EgressPolicy } from './policy.js'
import { type EgressRule, parseEgressRule } from './rules.js'

/** A profile's `network` setting: `none`, `bridge`, or an egress allowlist. */
export type ProfileNetwork = 'none' | 'bridge' | EgressPolicy

/** A part of a policy a provider cannot enforce; the message names the part and the rule. */
export class EgressUnenforceableError extends Error {
  override readonly name = 'EgressUnenforceableError'
}

/** At most this many CIDRs in Daytona's `networkAllowList`. */
export const DAYTONA_MAX_CIDRS = 5

/** Daytona's create fields for a profile's network. */
export interface DaytonaNetworkFields {
  networkBlockAll: boolean
  /** Comma-separated IPv4 CIDRs, the only destinations left open. */
  networkAllowList?: string
}

/** E2B's create fields for a profile's network (`allowInternetAccess`, `network.allowOut/denyOut`). */
export interface E2BNetworkFields {
  allowInternetAccess: boolean
  allowOut?: string[]
  denyOut?: string[]
}

/** `10.1.2.3/16` → `10.1.0.0/16`: the network address of an IPv4 prefix. */
function ipv4Network(rule: Extract<EgressRule, { kind: 'cidr' }>): string {
  const n = rule.address.split('.').reduce((acc, o) => acc * 256 + Number(o), 0)
  const size = 2 ** (32 - rule.bits)
  const base = Math.floor(n / size) * size
  const octets = [24, 16, 8, 0].map((s) => Math.floor(base / 2 ** s) % 256)
  return `${octets.join('.')}/${rule.bits}`
}

function refuseSecrets(policy: EgressPolicy, provider: string): void {
  if (policy.tlsIntercept)
    throw new EgressUnenforceableError(
      `tlsIntercept needs the service's egress proxy, which ${provider} sandboxes do not go through`,
    )
  const names = Object.keys(policy.secrets)
  if (names.length)
    throw new EgressUnenforceableError(
      `brokered secrets (${names.join(', ')}) need the service's egress proxy, which ${provider} sandboxes do not go through`,
    )
}

/**
 * Compiles a profile's network to Daytona's `networkBlockAll` / `networkAllowList`. Daytona filters
 * by address only: an allowlist must be at most {@link DAYTONA_MAX_CIDRS} IPv4 addresses or CIDRs,
 * without ports, and without brokered secrets; anything else throws {@link EgressUnenforceableError}.
 */
export function daytonaNetwork(network: ProfileNetwork): DaytonaNetworkFields {
  if (network === 'bridge') return { networkBlockAll: false }
  if (network === 'none') return { networkBlockAll: true }
  refuseSecrets(network, 'Daytona')
  const cidrs: string[] = []
  for (const text of network.allow) {
    const rule = parseEgressRule(text)
    if (rule.kind !== 'cidr' || rule.family !== 4)
      throw new EgressUnenforceableError(
        `Daytona's networkAllowList takes IPv4 addresses and CIDRs only, not host names, wildcards or IPv6 (rule '${text}')`,
      )
    if (rule.ports !== 'any')
      throw new EgressUnenforceableError(
        `Daytona's networkAllowList has no ports (rule '${text}'); drop the ':port'`,
      )
    cidrs.push(ipv4Network(rule))
  }
  if (cidrs.length > DAYTONA_MAX_CIDRS)
    throw new EgressUnenforceableError(
      `Daytona's networkAllowList takes at most ${DAYTONA_MAX_CIDRS} CIDRs (the profile has ${cidrs.length})`,
    )
  return { networkBlockAll: false, networkAllowList: cidrs.join(',') }
}

/**
 * Compiles a profile's network to E2B's `allowInternetAccess` and `network.allowOut` / `denyOut`
 * (everything denied, the rules allowed: E2B lets allowed entries win). E2B filters names only for
 * HTTP and HTTPS (by Host and SNI), so a name rule must keep the default ports (80 and 443); an
 * address rule must have no port; brokered secrets are refused (they need the service's proxy).
 */
export function e2bNetwork(network: ProfileNetwork): E2BNetworkFields {
  if (network === 'bridge') return { allowInternetAccess: true }
  if (network === 'none') return { allowInternetAccess: false }
  refuseSecrets(network, 'E2B')
  const allowOut: string[] = []
  for (const text of network.allow) {
    const rule = parseEgressRule(text)
    if (rule.kind === 'host') {
      const ports = rule.ports === 'any' ? [] : rule.ports
      if (ports.length !== 2 || !ports.includes(80) || !ports.includes(443))
        throw new EgressUnenforceableError(
          `E2B filters host names on HTTP and HTTPS (ports 80 and 443) only, so rule '${text}' cannot be kept to its ports; write the name without a port`,
        )
      allowOut.push(rule.wildcard ? `*.${rule.host}` : rule.host)
      continue
    }
    if (rule.ports !== 'any')
      throw new EgressUnenforceableError(`E2B's allowOut has no ports (rule '${text}'); drop the ':port'`)
    allowOut.push(rule.family === 4 ? ipv4Network(rule) : `${rule.address}/${rule.bits}`)
  }
  return { allowInternetAccess: false, allowOut, denyOut: ['0.0.0.0/0'] }
}

/** Compiled remote fields in one line, e.g. `networkBlockAll: false, networkAllowList: 10.0.0.0/8`. */
export function describeRemoteNetwork(
  provider: 'daytona' | 'e2b',
  fields: DaytonaNetworkFields | E2BNetworkFields,
): string {
  const parts = Object.entries(fields).map(
    ([k, v]) =>
      `${provider === 'e2b' && k !== 'allowInternetAccess' ? `network.${k}` : k}: ${Array.isArray(v) ? v.join(', ') : String(v)}`,
  )
  return `${provider}'s ${parts.join('; ')}`
}
