import type { ResolvedProfile } from './profiles.js'

/**
 * Resolves a `(providerId, profile)` pair to the profile it names: the one question routing,
 * sessions and services ask of the provider registry. `ProviderRegistry` implements it (and answers
 * the provider too). Unknown names throw `UNKNOWN_PROVIDER` / `UNKNOWN_PROFILE` listing the known
 * ones — never a fallback to anything else.
 */
export interface ProfileResolver {
  resolve(providerId: string, profile: string): { readonly profile: ResolvedProfile }
}
