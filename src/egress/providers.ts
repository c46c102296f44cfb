import { AppError } from '../errors.js'
import {
  EgressUnenforceableError,
  type ProfileNetwork,
  daytonaNetwork,
  describeRemoteNetwork,
  e2bNetwork,
} from './remote.js'
import { parseEgressRule, ruleCovers } from './rules.js'

/** A part of the egress policy language (docs/egress.md), as `/v1/providers` reports it. */
export type EgressPart =
  | 'block-all'
  | 'cidrs'
  | 'hosts'
  | 'wildcards'
  | 'ports'
  | 'tenant-caps'
  | 'brokered-secrets-http'
  | 'brokered-secrets-https'

const ALL_PARTS: readonly EgressPart[] = [
  'block-all',
  'cidrs',
  'hosts',
  'wildcards',
  'ports',
  'tenant-caps',
  'brokered-secrets-http',
  'brokered-secrets-https',
]

/** What a provider enforces of the egress policy, as `/v1/providers` reports it. */
export interface EgressSupport {
  /** Whether it takes `network: { allow }` profiles at all (within {@link enforces}). */
  allowlist: boolean
  /** The provider's own mechanism the policy compiles to. */
  mechanism: string
  /** Parts of the policy language it enforces. */
  enforces: EgressPart[]
  /** Parts it cannot enforce: a profile using one is refused at start-up. */
  refuses: EgressPart[]
  /** The limits, in words. */
  reason?: string
}

const SUPPORT: Readonly<Record<string, Omit<EgressSupport, 'refuses'>>> = {
  docker: {
    allowlist: true,
    mechanism: "the service's egress proxy (the sandbox has no network of its own)",
    enforces: [...ALL_PARTS],
  },
  daytona: {
    allowlist: true,
    mechanism: 'networkBlockAll / networkAllowList',
    enforces: ['block-all', 'cidrs', 'tenant-caps'],
    reason:
      'Daytona filters by address: up to five IPv4 CIDRs, no host names, wildcards, ports or brokered secrets; a tenant cap must hold every rule (checked at start-up)',
  },
  e2b: {
    allowlist: true,
    mechanism: 'allowInternetAccess: false, network.allowOut / denyOut 0.0.0.0/0',
    enforces: ['block-all', 'cidrs', 'hosts', 'wildcards', 'tenant-caps'],
    reason:
      'E2B filters host names on HTTP and HTTPS only (no other ports) and addresses without ports; no brokered secrets; a tenant cap must hold every rule (checked at start-up)',
  },
}

/** What `provider` enforces of the egress policy. */
export function egressSupport(provider: string): EgressSupport {
  const s = SUPPORT[provider] ?? {
    allowlist: false,
    mechanism: 'none',
    enforces: ['block-all'],
    reason: `provider '${provider}' has no egress allowlist`,
  }
  return { ...s, refuses: ALL_PARTS.filter((p) => !s.enforces.includes(p)) }
}

/**
 * How `provider` enforces `network`, in one line (`sbx config check`); throws
 * {@link EgressUnenforceableError} when it cannot.
 */
export function describeEnforcement(provider: string, network: ProfileNetwork): string {
  switch (provider) {
    case 'docker':
      return "the service's egress proxy"
    case 'daytona':
    case 'e2b':
      return describeRemoteNetwork(
        provider,
        provider === 'daytona' ? daytonaNetwork(network) : e2bNetwork(network),
      )
    default:
      if (typeof network === 'object')
        throw new EgressUnenforceableError(`provider '${provider}' has no egress allowlist`)
      return network
  }
}

/**
 * Refuses, at start-up, a profile whose egress policy its provider cannot enforce, with the reason
 * and the fix: never run it weaker. On a remote provider (which cannot intersect a tenant's cap per
 * sandbox) every rule must also lie inside every tenant cap (`caps`, by tenant).
 */
export function assertEgressEnforceable(
  profile: string,
  provider: string,
  network: ProfileNetwork | undefined,
  caps: Readonly<Record<string, readonly string[]>> = {},
): void {
  if (typeof network !== 'object' || provider === 'docker') return
  const refuse = (why: string): never => {
    throw new AppError(
      'CONFIG_INVALID',
      `profile '${profile}': network.allow cannot be enforced on provider '${provider}': ${why}; change the rules, use provider docker (its egress proxy enforces the whole policy), or network: none`,
    )
  }
  try {
    describeEnforcement(provider, network)
  } catch (err) {
    if (err instanceof EgressUnenforceableError) refuse(err.message)
    throw err
  }
  for (const [tenant, cap] of Object.entries(caps)) {
    const capRules = cap.map(parseEgressRule)
    for (const text of network.allow) {
      const rule = parseEgressRule(text)
      if (!capRules.some((c) => ruleCovers(c, rule)))
        refuse(
          `rule '${text}' is not inside tenant '${tenant}''s egress cap (${cap.join(', ')}), and ${provider} cannot apply a cap per sandbox`,
        )
    }
  }
}

/** The tenant caps of config `egress.tenants`, as rule lists by tenant. */
export function egressCaps(
  tenants: Readonly<Record<string, { allow: readonly string[] }>>,
): Record<string, readonly string[]> {
  return Object.fromEntries(Object.entries(tenants).map(([t, c]) => [t, c.allow]))
}
