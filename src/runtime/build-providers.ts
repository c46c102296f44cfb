import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { createDockerProvider } from '../../providers/docker/index.js'
import type { Config } from '../config/index.js'
import type { LoadedConfig } from '../config/load.js'
import { EgressProxy } from '../egress/proxy.js'
import type { EgressAuditEvent } from '../egress/proxy.js'
import { assertEgressEnforceable, egressCaps } from '../egress/providers.js'
import type { Logger } from '../logger.js'
import { AppError } from '../errors.js'
import { ProviderRegistry } from '../sandbox/registry.js'
import type { SandboxProvider } from '../sandbox/types.js'
import { dockerOptionsOf } from './docker-options.js'
import { createRemoteProviders } from './remote-providers.js'

/** The providers of a process, with their profiles, and the egress proxy Docker sandboxes use. */
export interface Providers {
  readonly registry: ProviderRegistry
  readonly egressProxy: EgressProxy
  /** Counts egress audits from now on (they are logged from the start): called once metrics exist. */
  countEgress(count: (e: EgressAuditEvent) => void): void
}

/**
 * Registers the Docker provider (when enabled), the remote providers whose keys `env` holds, and
 * every configured profile. Throws `CONFIG_INVALID` for a profile whose egress policy its provider
 * cannot enforce.
 */
export function buildProviders(
  loaded: LoadedConfig,
  env: Readonly<Record<string, string | undefined>>,
  logger: Logger,
): Providers {
  const { config } = loaded
  const registry = new ProviderRegistry()
  // Audits land in the log now and in the metrics once they exist.
  let counter: ((e: EgressAuditEvent) => void) | undefined
  const egressProxy = new EgressProxy({
    ...(config.egress.upstreamCaFile ? { upstreamCaFile: config.egress.upstreamCaFile } : {}),
    onAudit: (e) => {
      logger.info({ egress: e }, `egress ${e.verdict} ${e.destination}`)
      counter?.(e)
    },
  })
  if (config.providers.docker.enabled) registry.register(dockerProvider(config, egressProxy))
  for (const remote of createRemoteProviders(config.providers, env)) registry.register(remote)
  for (const [name, p] of loaded.profiles) {
    assertEgressEnforceable(name, p.provider, p.network, egressCaps(config.egress.tenants))
    const { name: _n, ...input } = p
    registry.addProfile(name, input)
  }
  addNoNetworkVariants(registry, loaded)
  return { registry, egressProxy, countEgress: (count) => (counter = count) }
}

/** The Docker provider of `providers.docker`, its sandboxes' egress through `proxy`. */
function dockerProvider(config: Config, proxy: EgressProxy): SandboxProvider {
  const dockerOptions = dockerOptionsOf(config.providers.docker.host)
  const { idleExitSlackMs, agentBinary, agentSocketDir } = config.providers.docker
  return createDockerProvider({
    ...(dockerOptions ? { dockerOptions } : {}),
    ...(idleExitSlackMs !== undefined ? { idleExitSlackMs } : {}),
    ...(agentBinary !== undefined ? { agentBinary } : {}),
    ...(agentSocketDir !== undefined ? { agentSocketDir } : {}),
    egress: {
      proxy,
      socketDir: config.egress.socketDir ?? join(tmpdir(), `sbx-egress-${process.getuid?.() ?? 'user'}`),
      tenantCaps: egressCaps(config.egress.tenants),
    },
  })
}

/** Name of the network-less variant of `profile` (the E2B endpoint's `allowInternetAccess: false`). */
export function noNetworkVariant(profile: string): string {
  return `${profile}.no-internet`
}

/**
 * Registers, for each profile an E2B template maps to that has a network, its variant without one:
 * the E2B endpoint runs a create asking for no internet there (docs/e2b-endpoint.md). The API and
 * the workers derive the same variants from the same config, so a fleet's workers know them.
 */
function addNoNetworkVariants(registry: ProviderRegistry, loaded: LoadedConfig): void {
  for (const name of new Set(Object.values(loaded.config.e2b.templates))) {
    const p = loaded.profiles.get(name)
    if (!p || p.network === 'none') continue
    const variant = noNetworkVariant(name)
    if (loaded.profiles.has(variant))
      throw new AppError(
        'CONFIG_INVALID',
        `profile '${variant}' is reserved: it names the network-less variant of profile '${name}' (an E2B template maps to it); rename that profile`,
      )
    const { name: _n, ...input } = p
    registry.addProfile(variant, { ...input, network: 'none' })
  }
}
