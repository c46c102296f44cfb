import type { ResolvedProfile } from './profiles.js'
import type { SandboxProvider } from './types.js'

/**
 * Resolves a `(providerId, profile)` pair to the profile it names: the one question routing,
 * sessions and services ask of the provider registry. `ProviderRegistry` implements it (and answers
 * the provider too). Unknown names throw `UNKNOWN_PROVIDER` / `UNKNOWN_PROFILE` listing the known
 * ones — never a fallback to anything else.
 */
export interface ProfileResolver {
  resolve(providerId: string, profile: string): { readonly profile: ResolvedProfile }
}

/** A provider and the profile a call resolved to. */
export interface ResolvedRoute {
  provider: SandboxProvider
  profile: ResolvedProfile
}

/**
 * A {@link ProfileResolver} that holds the providers too: what the session pool resolves a session
 * key with, and destroys and reaps through. `ProviderRegistry` is one.
 */
export interface ProviderResolver extends ProfileResolver {
  /** The provider and the profile of that provider (the errors of {@link ProfileResolver}). */
  resolve(providerId: string, profile: string): ResolvedRoute
  /** The provider with this id; `UNKNOWN_PROVIDER` listing the known ids otherwise. */
  get(providerId: string): SandboxProvider
  /** Ids of every registered provider, for `reap()`; without it the pool reaps the providers it used. */
  providerIds?(): Iterable<string>
}
