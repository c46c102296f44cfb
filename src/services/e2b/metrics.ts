/**
 * The figures behind E2B's sandbox metrics: the CPU and memory use of a session's bound sandbox as
 * its provider measures it ({@link SandboxProvider.stats}, Docker: the engine's stats). Only a
 * process that holds sandboxes (`sbx serve`) offers them, as for pause.
 */
import { AppError } from '../../errors.js'
import type { ProviderRegistry } from '../../sandbox/registry.js'
import type { SandboxProvider, SandboxStats } from '../../sandbox/types.js'
import type { SandboxSessionPool } from '../../sessions/pool.js'
import type { SessionDirectory } from '../session-directory.js'
import { keyOf } from '../session-service.js'
import type { SessionStreamService } from '../session-streams.js'

export type { SandboxStats }

/** The endpoint's `sandboxStats` hook (docs/e2b-endpoint.md, metrics). */
export interface E2BStatsHooks {
  /**
   * The CPU and memory use of the tenant's session's sandbox now; undefined when the session holds
   * no sandbox yet. `NOT_FOUND` for an unknown session, `UNSUPPORTED` when its provider has no figures.
   */
  sandboxStats(tenant: string, sessionId: string): Promise<SandboxStats | undefined>
}

/** The stats hook over `runtime`'s session directory, pool and providers; `{}` where sandboxes are held elsewhere. */
export function e2bStatsHooks(runtime: {
  readonly registry: ProviderRegistry
  readonly directory: SessionDirectory
  readonly pool: SandboxSessionPool
  /** Present only in a process that holds sandboxes: figures are offered there only. */
  readonly streams?: SessionStreamService
}): Partial<E2BStatsHooks> {
  if (!runtime.streams) return {}
  const providerOf = (id: string): SandboxProvider | undefined => {
    try {
      return runtime.registry.get(id)
    } catch {
      return undefined
    }
  }
  return {
    async sandboxStats(tenant, sessionId) {
      const record = await runtime.directory.get(tenant, sessionId)
      if (!record) throw new AppError('NOT_FOUND', `no session ${sessionId}`)
      const p = providerOf(record.provider)
      if (!p?.stats)
        throw new AppError(
          'UNSUPPORTED',
          `metrics are not available: provider '${record.provider}' (profile '${record.profile}') gives no figures of its sandboxes`,
        )
      const { sandboxId } = await runtime.pool.state(keyOf(record))
      if (!sandboxId) return undefined
      return p.stats({ providerId: record.provider, id: sandboxId, profile: record.profile, labels: {} })
    },
  }
}
