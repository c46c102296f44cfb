/**
 * E2B's pause and resume over our sessions: the session's bound sandbox is frozen in place by its
 * provider ({@link SandboxProvider.pause}, Docker's engine pause) and thawed on resume. Only a
 * process that holds sandboxes (`sbx serve`; not `sbx api`, whose workers hold them) offers it.
 */
import { AppError } from '../../errors.js'
import type { ProviderRegistry } from '../../sandbox/registry.js'
import type { SandboxProvider } from '../../sandbox/types.js'
import type { SandboxSessionPool } from '../../sessions/pool.js'
import type { SessionDirectory } from '../session-directory.js'
import { keyOf } from '../session-service.js'
import type { SessionStreamService } from '../session-streams.js'

/** The endpoint's `canPause` / `setPaused` hooks (docs/e2b-endpoint.md). */
export interface E2BPauseHooks {
  canPause(provider: string): boolean
  setPaused(tenant: string, sessionId: string, paused: boolean, sandbox?: string): Promise<string | undefined>
}

/** The pause hooks over `runtime`'s session directory, pool and providers. */
export function e2bPauseHooks(runtime: {
  readonly registry: ProviderRegistry
  readonly directory: SessionDirectory
  readonly pool: SandboxSessionPool
  /** Present only in a process that holds sandboxes: pause is offered there only. */
  readonly streams?: SessionStreamService
}): E2BPauseHooks {
  const providerOf = (id: string): SandboxProvider | undefined => {
    try {
      return runtime.registry.get(id)
    } catch {
      return undefined
    }
  }
  return {
    canPause(provider) {
      const p = providerOf(provider)
      return runtime.streams !== undefined && typeof p?.pause === 'function' && typeof p.resume === 'function'
    },
    async setPaused(tenant, sessionId, paused, expected) {
      const record = await runtime.directory.get(tenant, sessionId)
      if (!record) throw new AppError('NOT_FOUND', `no session ${sessionId}`)
      const p = providerOf(record.provider)
      if (!p?.pause || !p.resume)
        throw new AppError('UNSUPPORTED', `provider ${record.provider} cannot pause sandboxes`)
      const { sandboxId } = await runtime.pool.state(keyOf(record))
      if (!paused && expected && sandboxId !== expected)
        throw new AppError(
          'NOT_FOUND',
          `its sandbox ${expected.slice(0, 12)} is gone (idle eviction or a lost sandbox)`,
        )
      // A session whose sandbox is not created yet has nothing to freeze.
      if (!sandboxId) return undefined
      const ref = { providerId: record.provider, id: sandboxId, profile: record.profile, labels: {} }
      await (paused ? p.pause(ref) : p.resume(ref))
      return sandboxId
    },
  }
}
