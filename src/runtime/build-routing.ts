import type { Config } from '../config/index.js'
import { LifecycleDispatcher } from '../lifecycle/dispatcher.js'
import type { ServiceEventLog } from '../lifecycle/service-events.js'
import type { Logger } from '../logger.js'
import type { JobQueue } from '../queue/types.js'
import { MemoryCircuitBreaker, RedisCircuitBreaker } from '../routing/circuit-breaker.js'
import type { CircuitBreaker, CircuitTransition } from '../routing/circuit-breaker.js'
import { circuitEvent } from '../routing/circuit-events.js'
import { policyAwareTargets, RoutePolicies } from '../routing/policies.js'
import type { ProfileResolver } from '../sandbox/resolver.js'
import { PolicyPool } from '../routing/policy-pool.js'
import { QueueRouteExecutor } from '../routing/queue-route-executor.js'
import type { ProviderRegistry } from '../sandbox/registry.js'
import type { SandboxSessionPool } from '../sessions/pool.js'
import type { Redis } from 'ioredis'

/** How calls reach sandboxes: policies and circuits over the pool, and the router onto the queue. */
export interface Routing {
  /** The configured routing policies (config `routing.policies`). */
  readonly policies: RoutePolicies
  /** Providers and policies, resolved alike. */
  readonly targets: ProfileResolver
  /** Per-provider circuits (shared through Redis in fleet mode). */
  readonly breaker: CircuitBreaker
  /** The pool behind policies and circuits: it picks a policy's candidate (pinned per session). */
  readonly routed: PolicyPool
  readonly router: QueueRouteExecutor
  /** The extensions' lifecycle hooks, told circuit transitions: registered once extensions load. */
  readonly lifecycle: LifecycleDispatcher
}

/** What {@link buildRouting} needs. */
export interface RoutingParts {
  readonly config: Config
  readonly registry: ProviderRegistry
  readonly pool: SandboxSessionPool
  readonly queue: JobQueue
  /** The fleet's Redis (circuits shared by every process), else circuits are this process's. */
  readonly redis: Redis | undefined
  readonly prefix: string
  readonly serviceEvents: ServiceEventLog
  readonly logger: Logger
}

/**
 * Routing policies resolve like providers: the router builds their jobs with limits every candidate
 * honours, and the policy pool picks the candidate. Throws `CONFIG_INVALID` for a bad policy.
 */
export function buildRouting(p: RoutingParts): Routing {
  const { config, registry, redis, prefix } = p
  const policies = new RoutePolicies(config.routing.policies, registry, registry.providerIds())
  const targets = policyAwareTargets(registry, policies)
  const lifecycle = new LifecycleDispatcher()
  const onTransition = announceTransition(p.logger, p.serviceEvents, lifecycle)
  const breaker: CircuitBreaker = redis
    ? new RedisCircuitBreaker(redis, prefix, config.routing.circuit, onTransition)
    : new MemoryCircuitBreaker(config.routing.circuit, Date.now, onTransition)
  const routed = new PolicyPool(p.pool, policies, breaker)
  const router = new QueueRouteExecutor({ queue: p.queue, targets, tenantRoutes: config.routing.tenants })
  return { policies, targets, breaker, routed, router, lifecycle }
}

/**
 * Circuit transitions: told once fleet-wide (by the process whose call made them) to the log, the
 * service's event stream (GET /v1/events) and the extensions' lifecycle hooks.
 */
function announceTransition(
  logger: Logger,
  serviceEvents: ServiceEventLog,
  lifecycle: LifecycleDispatcher,
): (t: CircuitTransition) => void {
  return (t) => {
    const line = `circuit of provider '${t.provider}' ${t.from} → ${t.to}: ${t.reason}`
    if (t.to === 'open') logger.warn({ circuit: t }, line)
    else logger.info({ circuit: t }, line)
    const event = circuitEvent(t)
    void serviceEvents
      .append(event)
      .catch((err: unknown) => logger.warn({ err }, 'circuit event not recorded'))
    void lifecycle.emit(event)
  }
}
