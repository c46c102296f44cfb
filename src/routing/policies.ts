import { z } from 'zod'
import { AppError } from '../errors.js'
import type { ResolvedProfile } from '../sandbox/profiles.js'
import type { ProfileResolver } from '../sandbox/resolver.js'

/**
 * Routing policies: a name a `routeTo(name, profile, command)` verdict may give instead of one
 * provider, standing for an ordered list of `(provider, profile)` candidates and a mode that says
 * when the next candidate is tried. A session is pinned to the candidate that first served it (its
 * files live there); fallback applies to new sessions and ephemeral calls only.
 */

/** How a policy picks among its candidates for a new session or an ephemeral call. */
export const ROUTE_MODES = ['failover', 'spillover', 'weighted', 'cheapest', 'fastest'] as const
export type RouteMode = (typeof ROUTE_MODES)[number]

/** One candidate of a policy (config `routing.policies.<name>.candidates[]`). */
export const RouteCandidateSchema = z
  .object({
    /** A provider id (`docker`, `daytona`, `e2b`, …). */
    provider: z.string().min(1),
    /** A profile of that provider. */
    profile: z.string().min(1),
    /** Share of new sessions in `weighted` mode. @default 1 */
    weight: z.number().positive().default(1),
    /** Price of one sandbox-second, for `cheapest` (any currency, the same for every candidate). */
    pricePerSecond: z.number().nonnegative().optional(),
  })
  .strict()

/** A routing policy (config `routing.policies.<name>`). */
export const RoutePolicySchema = z
  .object({
    /**
     * `failover`: the next candidate when a create fails (rate limited, unavailable, at capacity);
     * `spillover`: the next only when the current one is at capacity (its `pool.maxSize`, the
     * provider's `maxSandboxes`, or the provider's own concurrency quota, a 429);
     * `weighted`: new sessions spread by weight, failing over like `failover`;
     * `cheapest` / `fastest`: by `pricePerSecond` / by the create latency measured on this worker,
     * failing over like `failover`. Candidates whose circuit is open are skipped. @default 'failover'
     */
    mode: z.enum(ROUTE_MODES).default('failover'),
    candidates: z.array(RouteCandidateSchema).min(1, 'a routing policy needs at least one candidate'),
  })
  .strict()

export type RouteCandidate = z.output<typeof RouteCandidateSchema>
export type RoutePolicyConfig = z.output<typeof RoutePolicySchema>

/** A validated policy: its name, mode and candidates with their resolved profiles. */
export interface RoutePolicy {
  readonly name: string
  readonly mode: RouteMode
  readonly candidates: readonly (RouteCandidate & { readonly resolved: ResolvedProfile })[]
}

/** The profile argument of a verdict that names a policy and lets the policy choose the profile. */
export const AUTO_PROFILE = 'auto'

/** The configured policies, checked against the providers and profiles once. */
export class RoutePolicies {
  private readonly byName: ReadonlyMap<string, RoutePolicy>

  /**
   * Validates every candidate against `targets` (each must name a configured provider and one of its
   * profiles) and that no policy is named like a provider; throws `CONFIG_INVALID` saying which.
   */
  constructor(
    configs: Readonly<Record<string, RoutePolicyConfig>>,
    targets: ProfileResolver,
    providerIds: readonly string[],
  ) {
    const byName = new Map<string, RoutePolicy>()
    for (const [name, config] of Object.entries(configs)) {
      if (providerIds.includes(name))
        throw new AppError(
          'CONFIG_INVALID',
          `routing.policies.${name}: a policy cannot be named like the provider '${name}'; rename the policy`,
        )
      const candidates = config.candidates.map((c, i) => {
        try {
          return { ...c, resolved: targets.resolve(c.provider, c.profile).profile }
        } catch (err) {
          const why = err instanceof Error ? err.message : String(err)
          throw new AppError(
            'CONFIG_INVALID',
            `routing.policies.${name}.candidates[${i}] (${c.provider}/${c.profile}): ${why}` +
              (err instanceof AppError && err.code === 'UNKNOWN_PROVIDER'
                ? ' (a remote provider is configured when its API key is set)'
                : ''),
            { cause: err },
          )
        }
      })
      byName.set(name, { name, mode: config.mode, candidates })
    }
    this.byName = byName
  }

  /** The policy of this name, if one is configured. */
  get(name: string): RoutePolicy | undefined {
    return this.byName.get(name)
  }

  /** Names of the configured policies, sorted. */
  names(): string[] {
    return [...this.byName.keys()].sort()
  }

  /**
   * The candidates a verdict `routeTo(policy, profile)` may use: every one for `auto` (or the
   * policy's own name), else those with that profile; `UNKNOWN_PROFILE` when none has it.
   */
  candidatesFor(policy: RoutePolicy, profile: string): RoutePolicy['candidates'] {
    if (profile === AUTO_PROFILE || profile === policy.name) return policy.candidates
    const matching = policy.candidates.filter((c) => c.profile === profile)
    if (matching.length === 0)
      throw new AppError(
        'UNKNOWN_PROFILE',
        `routing policy '${policy.name}' has no candidate with profile '${profile}'; pass profile '${AUTO_PROFILE}' ` +
          `(the policy picks) or one of: ${[...new Set(policy.candidates.map((c) => c.profile))].join(', ')}`,
      )
    return matching
  }
}

/**
 * The limits a call routed by a policy runs with, whichever candidate takes it: the smallest default
 * and maximum timeout and output cap of its candidates; a shell mode only when they all agree.
 */
export function policyProfile(
  policy: RoutePolicy,
  profile: string,
  candidates: RoutePolicy['candidates'],
): ResolvedProfile {
  const first = candidates[0]
  if (!first) throw new AppError('CONFIG_INVALID', `routing policy '${policy.name}' has no candidates`)
  const min = (f: (p: ResolvedProfile) => number): number => Math.min(...candidates.map((c) => f(c.resolved)))
  const shells = new Set(candidates.map((c) => c.resolved.shell))
  const { shell: _shell, ...rest } = first.resolved
  const shell = shells.size === 1 ? first.resolved.shell : undefined
  return {
    ...rest,
    ...(shell ? { shell } : {}),
    name: profile,
    provider: policy.name,
    defaultTimeoutMs: min((p) => p.defaultTimeoutMs),
    maxTimeoutMs: min((p) => p.maxTimeoutMs),
    outputCapBytes: min((p) => p.outputCapBytes),
  }
}

/**
 * A {@link ProfileResolver} that also resolves policy names: a policy resolves to {@link policyProfile},
 * so a job built for it carries limits every candidate honours.
 */
export function policyAwareTargets(targets: ProfileResolver, policies: RoutePolicies): ProfileResolver {
  return {
    resolve(providerId, profile) {
      const policy = policies.get(providerId)
      if (!policy) return targets.resolve(providerId, profile)
      return { profile: policyProfile(policy, profile, policies.candidatesFor(policy, profile)) }
    },
  }
}

/** Config `routing.tenants`: per tenant, the providers and policies its calls may name. */
export type TenantRouteAllowList = Readonly<Record<string, { readonly allow: readonly string[] }>>

/**
 * Refuses (`FORBIDDEN`) a route to a provider or policy outside the tenant's allow-list; a tenant
 * without a list may use every provider and policy.
 */
export function assertTenantMayRoute(
  tenants: TenantRouteAllowList,
  tenant: string,
  providerId: string,
): void {
  const allow = tenants[tenant]?.allow
  if (!allow || allow.includes(providerId)) return
  throw new AppError(
    'FORBIDDEN',
    `tenant '${tenant}' may not route to '${providerId}': its calls may use ${allow.join(', ')} ` +
      `(config routing.tenants.${tenant}.allow)`,
  )
}
