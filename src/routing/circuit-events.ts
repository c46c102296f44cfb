import type { LifecycleEventType } from '../lifecycle/events.js'
import type { ServiceEventInit } from '../lifecycle/service-events.js'
import type { CircuitTransition } from './circuit-breaker.js'

const TYPE_OF: Record<CircuitTransition['to'], LifecycleEventType> = {
  open: 'CIRCUIT_OPEN',
  'half-open': 'CIRCUIT_HALF_OPEN',
  closed: 'CIRCUIT_CLOSED',
}

/**
 * The lifecycle event of a circuit transition: `CIRCUIT_OPEN` / `CIRCUIT_HALF_OPEN` /
 * `CIRCUIT_CLOSED`, runtime `router`, the provider id as `message`, and the provider, both states,
 * the failures counted, the reason and (when opened) `openUntil` as attributes.
 */
export function circuitEvent(t: CircuitTransition, now = Date.now()): ServiceEventInit {
  return {
    type: TYPE_OF[t.to],
    runtime: 'router',
    step: 0,
    message: t.provider,
    attributes: {
      provider: t.provider,
      from: t.from,
      to: t.to,
      failures: t.failures,
      reason: t.reason,
      ...(t.openUntil !== undefined ? { openUntil: t.openUntil } : {}),
    },
    timestamp: now,
  }
}
