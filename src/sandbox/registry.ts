import { ZodError } from 'zod'
import { AppError } from '../errors.js'
import { type ProfileInput, type ResolvedProfile, resolveProfile } from './profiles.js'
import type { ProviderResolver, ResolvedRoute } from './resolver.js'
import type { SandboxProvider } from './types.js'

const listOf = (names: Iterable<string>): string => [...names].sort().join(', ') || '(none)'

/**
 * The providers and named profiles of one process. The composition root registers built-in and
 * third-party providers and the configured profiles; the router resolves `routeTo(providerId,
 * profile)` verdicts through it. Unknown names never fall back to anything: they throw
 * `UNKNOWN_PROVIDER` / `UNKNOWN_PROFILE` with the known names in the message.
 */
export class ProviderRegistry implements ProviderResolver {
  private readonly providers = new Map<string, SandboxProvider>()
  private readonly profiles = new Map<string, ResolvedProfile>()

  /** Registers a provider; a second provider with the same id is a `CONFIG_INVALID` error. */
  register(provider: SandboxProvider): this {
    if (!provider.id) throw new AppError('CONFIG_INVALID', 'a sandbox provider needs a non-empty id')
    if (this.providers.has(provider.id)) {
      throw new AppError(
        'CONFIG_INVALID',
        `provider '${provider.id}' is already registered; provider ids must be unique`,
      )
    }
    this.providers.set(provider.id, provider)
    return this
  }

  /** Whether a provider with this id is registered. */
  has(id: string): boolean {
    return this.providers.has(id)
  }

  /** The provider with this id; `UNKNOWN_PROVIDER` listing the known ids otherwise. */
  get(id: string): SandboxProvider {
    const provider = this.providers.get(id)
    if (!provider) {
      throw new AppError(
        'UNKNOWN_PROVIDER',
        `unknown sandbox provider '${id}'; known providers: ${listOf(this.providers.keys())}`,
      )
    }
    return provider
  }

  /** Ids of the registered providers, sorted. */
  providerIds(): string[] {
    return [...this.providers.keys()].sort()
  }

  /**
   * Validates a named profile (defaults filled in) and adds it. An invalid profile or a duplicate
   * name is a `CONFIG_INVALID` error naming the profile and the failing fields.
   */
  addProfile(name: string, input: ProfileInput): ResolvedProfile {
    if (!name) throw new AppError('CONFIG_INVALID', 'a profile needs a non-empty name')
    if (this.profiles.has(name)) throw new AppError('CONFIG_INVALID', `profile '${name}' is already defined`)
    let profile: ResolvedProfile
    try {
      profile = resolveProfile(name, input)
    } catch (err) {
      if (!(err instanceof ZodError)) throw err
      const issues = err.issues.map((i) => `${i.path.join('.') || '(profile)'}: ${i.message}`).join('; ')
      throw new AppError('CONFIG_INVALID', `profile '${name}' is invalid: ${issues}`, { cause: err })
    }
    this.profiles.set(name, profile)
    return profile
  }

  /** Adds several named profiles (e.g. the `profiles` section of the config file). */
  addProfiles(profiles: Record<string, ProfileInput>): this {
    for (const [name, input] of Object.entries(profiles)) this.addProfile(name, input)
    return this
  }

  /**
   * The named profile; `UNKNOWN_PROFILE` listing the known names otherwise. With `providerId`, a
   * profile written for another provider is also `UNKNOWN_PROFILE` (it is not a profile of that provider).
   */
  profile(name: string, providerId?: string): ResolvedProfile {
    const profile = this.profiles.get(name)
    if (!profile) {
      throw new AppError(
        'UNKNOWN_PROFILE',
        `unknown sandbox profile '${name}'; known profiles: ${listOf(this.profiles.keys())}`,
      )
    }
    if (providerId !== undefined && profile.provider !== providerId) {
      const matching = [...this.profiles.values()].filter((p) => p.provider === providerId).map((p) => p.name)
      throw new AppError(
        'UNKNOWN_PROFILE',
        `profile '${name}' targets provider '${profile.provider}', not '${providerId}'; profiles for '${providerId}': ${listOf(matching)}`,
      )
    }
    return profile
  }

  /** Names of the defined profiles, sorted. */
  profileNames(): string[] {
    return [...this.profiles.keys()].sort()
  }

  /** Resolves a `routeTo(providerId, profile)` pair; throws `UNKNOWN_PROVIDER` / `UNKNOWN_PROFILE`. */
  resolve(providerId: string, profileName: string): ResolvedRoute {
    const provider = this.get(providerId)
    return { provider, profile: this.profile(profileName, providerId) }
  }

  /** Closes every registered provider (errors of one do not stop the others). */
  async close(): Promise<void> {
    const results = await Promise.allSettled([...this.providers.values()].map((p) => p.close?.()))
    const failed = results.find((r): r is PromiseRejectedResult => r.status === 'rejected')
    if (failed) throw failed.reason
  }
}
