import { DOCKER_PROVIDER_ID, missingRuntimeError } from '../../providers/docker/index.js'
import { AppError } from '../errors.js'
import type { Logger } from '../logger.js'
import type { ProviderRegistry } from '../sandbox/registry.js'

/**
 * Start-up check of profiles' `runtime`: a profile asking for a runtime other than `runc` needs a
 * provider that offers it. Refuses (`CONFIG_INVALID`, naming the runtime and how to install it)
 * when the provider cannot run other runtimes or its engine answers without the runtime. An engine
 * that does not answer yet is only logged: its sandboxes' creation reports the same error later.
 */
export async function assertProfileRuntimes(registry: ProviderRegistry, logger: Logger): Promise<void> {
  for (const name of registry.profileNames()) {
    const profile = registry.profile(name)
    if (
      profile.workspace.persistent &&
      registry.has(profile.provider) &&
      !registry.get(profile.provider).workspaces
    )
      throw new AppError(
        'CONFIG_INVALID',
        `profile '${name}' asks for a persistent workspace, but provider '${profile.provider}' has none ` +
          `(GET /v1/providers, field workspaces); drop workspace.persistent or use provider: ${DOCKER_PROVIDER_ID}`,
      )
    if (profile.runtime === 'runc' || !registry.has(profile.provider)) continue
    const provider = registry.get(profile.provider)
    if (!provider.runtimes) {
      throw new AppError(
        'CONFIG_INVALID',
        `profile '${name}' asks for runtime '${profile.runtime}', but provider '${profile.provider}' ` +
          `runs its own isolation and takes runtime 'runc' only; drop runtime or use provider: ${DOCKER_PROVIDER_ID}`,
      )
    }
    let offered: string[]
    try {
      offered = await provider.runtimes()
    } catch (err) {
      logger.warn({ err, profile: name }, `cannot list the runtimes of provider '${profile.provider}' yet`)
      continue
    }
    if (!offered.includes(profile.runtime)) throw missingRuntimeError(name, profile.runtime, offered)
  }
}
