import { AppError } from '../errors.js'
import type { EgressPolicy } from './policy.js'

/**
 * Why a provider cannot enforce an egress allowlist, for those that cannot. Docker enforces it (its
 * sandboxes keep no network; the service's proxy is their only way out). Daytona's
 * `networkAllowList` takes at most five CIDRs and no ports or names, E2B's `allowInternetAccess` is
 * all or nothing: neither enforces this policy language, so such a profile is refused, never run weaker.
 */
const UNENFORCEABLE: Readonly<Record<string, string>> = {
  daytona:
    'Daytona can block all egress (networkBlockAll) or allow up to five CIDRs, but not host names, wildcards, ports or brokered secrets',
  e2b: 'E2B offers allowInternetAccess (all or nothing) here; host rules, ports and brokered secrets are not enforced by it',
}

/**
 * Refuses, at start-up, a profile whose egress allowlist its provider cannot enforce (every provider
 * but `docker`), with the reason and the fix.
 */
export function assertEgressEnforceable(
  profile: string,
  provider: string,
  network: 'none' | 'bridge' | EgressPolicy | undefined,
): void {
  if (typeof network !== 'object' || provider === 'docker') return
  const why = UNENFORCEABLE[provider] ?? `provider '${provider}' has no egress proxy`
  throw new AppError(
    'CONFIG_INVALID',
    `profile '${profile}': network.allow cannot be enforced on provider '${provider}': ${why}; use provider docker for an allowlist, or network: none`,
  )
}

/** What a provider enforces of the egress policy, as `/v1/providers` reports it. */
export interface EgressSupport {
  /** `network: { allow }` profiles (rules, tenant caps, brokered secrets over plain HTTP). */
  allowlist: boolean
  /** Why not, when `allowlist` is false. */
  reason?: string
}

/** What `provider` enforces of the egress policy. */
export function egressSupport(provider: string): EgressSupport {
  if (provider === 'docker') return { allowlist: true }
  return { allowlist: false, reason: UNENFORCEABLE[provider] ?? `provider '${provider}' has no egress proxy` }
}
