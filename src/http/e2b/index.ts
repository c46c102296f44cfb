/**
 * The E2B-compatible endpoint (docs/e2b-endpoint.md): E2B's control plane and envd on the service's
 * own port, backed by our sessions and background processes, so an app using the `e2b` SDK runs on
 * sandbox-router with `E2B_API_URL`, `E2B_SANDBOX_URL` and `E2B_API_KEY` pointed at us.
 */
import type { MiddlewareHandler } from 'hono'
import type { App, HttpEnv } from '../app.js'
import { registerControlPlane } from './control-plane.js'
import type { E2BRouteDeps } from './deps.js'
import { registerEnvd } from './envd.js'
import { sandboxHostRouter } from './hosts.js'
import { e2bLifecycle } from './lifecycle.js'
import { registerMetrics } from './metrics.js'
import { registerNetworkUpdate } from './network-update.js'
import { E2BSandboxStore } from './sandboxes.js'
import { registerE2BSnapshotRoutes } from './snapshots.js'
import { MemoryE2BState } from '../../services/e2b/state.js'

export type { E2BEndpointDeps, E2BCommandVerdict, E2BRouteDeps } from './deps.js'

/**
 * Registers the E2B routes on `app`; returns the store of E2B sandboxes (`close()` it at shutdown)
 * and the middleware serving sandbox host names (`getHost`), which the app must run before its
 * authentication.
 */
export function registerE2BRoutes(
  app: App,
  deps: E2BRouteDeps,
): { store: E2BSandboxStore; hosts: MiddlewareHandler<HttpEnv> } {
  const store: E2BSandboxStore = new E2BSandboxStore(
    deps.e2b.state ?? new MemoryE2BState(),
    async (s) => {
      deps.logger.info(
        { tenant: s.tenant, sandboxId: s.sandboxId },
        'e2b sandbox timed out; deleting its session',
      )
      // A frozen sandbox is thawed first, so its processes get their signals as they end.
      if (s.paused)
        await deps.e2b.setPaused?.(s.tenant, s.sandboxId, false, s.pausedSandbox).catch(() => undefined)
      await deps.sessions
        .delete(s.tenant, s.sandboxId)
        .catch((err: unknown) =>
          deps.logger.warn({ err, sandboxId: s.sandboxId }, 'could not delete a timed-out e2b sandbox'),
        )
    },
    async (s) => {
      deps.logger.info(
        { tenant: s.tenant, sandboxId: s.sandboxId },
        'e2b sandbox reached its timeout; pausing it (onTimeout: pause)',
      )
      await lifecycle.pauseAtTimeout(s).catch((err: unknown) => {
        deps.logger.warn(
          { err, sandboxId: s.sandboxId },
          'could not pause a timed-out e2b sandbox; killing it',
        )
        throw err
      })
    },
  )
  const lifecycle = e2bLifecycle(deps, store)
  registerEnvd(app, deps, store, lifecycle)
  registerControlPlane(app, deps, store, lifecycle)
  registerMetrics(app, deps, store)
  registerNetworkUpdate(app, deps, store)
  registerE2BSnapshotRoutes(app, deps, store)
  return { store, hosts: sandboxHostRouter(deps, store, lifecycle) }
}
