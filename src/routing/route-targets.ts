import { AppError } from '../errors.js'
import type { ResolvedProfile } from '../sandbox/profiles.js'
import type { ProfileResolver } from '../sandbox/resolver.js'

/**
 * What the router needs from the provider registry: the profile a `routeTo(providerId, profile)`
 * names — the shared {@link ProfileResolver} (src/sandbox/resolver.ts), under the name the routing
 * modules use.
 */
export type RouteTargets = ProfileResolver

/**
 * Route targets from a fixed list (for the worker-less router of a test or a remote-queue client
 * that knows the fleet's profiles but holds no providers).
 */
export function staticRouteTargets(
  providerIds: readonly string[],
  profiles: readonly ResolvedProfile[],
): RouteTargets {
  const list = (names: Iterable<string>): string => [...names].sort().join(', ') || '(none)'
  const byName = new Map(profiles.map((p) => [p.name, p]))
  return {
    resolve(providerId, name) {
      if (!providerIds.includes(providerId)) {
        throw new AppError(
          'UNKNOWN_PROVIDER',
          `unknown sandbox provider '${providerId}'; known providers: ${list(providerIds)}`,
        )
      }
      const profile = byName.get(name)
      if (!profile || profile.provider !== providerId) {
        const known = profiles.filter((p) => p.provider === providerId).map((p) => p.name)
        throw new AppError(
          'UNKNOWN_PROFILE',
          `unknown sandbox profile '${name}' for provider '${providerId}'; known profiles: ${list(known)}`,
        )
      }
      return { profile }
    },
  }
}
