import type { CircuitState } from '../routing/circuit-breaker.js'
import type { SandboxHealth } from '../sandbox/types.js'

/** Provider registry view for `GET /v1/providers`. */
export interface ProviderView {
  id: string
  health: SandboxHealth
  /** The provider's circuit (routing policies skip an open one). */
  circuit?: CircuitState
  /** What the provider enforces of a profile's egress policy. */
  egress?: {
    allowlist: boolean
    mechanism?: string
    enforces?: string[]
    refuses?: string[]
    reason?: string
  }
  profiles: {
    name: string
    cpu: number
    memoryMb: number
    network: string
    /** `runc` or `runsc` (gVisor). */
    runtime: string
    defaultTimeoutMs: number
    maxTimeoutMs: number
  }[]
  /** Runtimes the provider's engine offers (Docker: its registered runtimes); absent when unknown. */
  runtimes?: string[]
  /** Docker with `queue.engineRouting`: each engine of the fleet, its state and load. */
  engines?: {
    id: string
    state: 'live' | 'down'
    draining: boolean
    running: number
    cap?: number
    memoryBytes?: number
    memoryStrict?: boolean
    reservedBytes?: number
    seenAt: number
    reason?: string
    /** Live worker gateways of the engine (`fleet.gateway`). */
    gateways?: number
    /** Their URLs: an admin key's view only (never a tenant's). */
    gatewayUrls?: string[]
  }[]
  /** Which of persistent workspaces, snapshots and forks the provider supports (docs/workspaces.md). */
  workspaces?: { persistent: boolean; snapshots: boolean; fork: boolean }
}

/** A routing policy for `GET /v1/providers` (config `routing.policies`). */
export interface PolicyView {
  name: string
  mode: string
  candidates: { provider: string; profile: string; weight: number; pricePerSecond?: number }[]
}
