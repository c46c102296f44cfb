import type { EgressAuditEvent } from '../egress/proxy.js'
import { Metrics } from '../metrics.js'
import type { EngineDirectory } from '../queue/engines/engine-directory.js'
import { engineViews } from '../fleet/engine-gateways.js'
import type { JobQueue } from '../queue/types.js'
import type { CircuitBreaker } from '../routing/circuit-breaker.js'
import type { ProviderRegistry } from '../sandbox/registry.js'
import type { SandboxSessionPool } from '../sessions/pool.js'
import type { ExecWorkerEvent } from '../worker/exec-worker.js'
import type { AgentRunRecord } from '../services/agent-runs/types.js'

/** What the metrics read at scrape time. */
export interface MetricsParts {
  readonly queue: JobQueue
  readonly engines: EngineDirectory | undefined
  readonly registry: ProviderRegistry
  readonly breaker: CircuitBreaker
  readonly pool: SandboxSessionPool
}

/** The process's metrics over the queue's depth, the engines, each provider's circuit and the pool. */
export function buildMetrics({ queue, engines, registry, breaker, pool }: MetricsParts): Metrics {
  return new Metrics({
    queueDepth: () => queue.counts(),
    ...(engines
      ? {
          engines: async () =>
            (await engineViews(engines)).map(({ gatewayUrls, ...e }) => ({
              ...e,
              gateways: gatewayUrls.length,
            })),
        }
      : {}),
    circuits: async () =>
      Object.fromEntries(
        await Promise.all(
          registry.providerIds().map(async (id) => [id, (await breaker.state(id)).state] as const),
        ),
      ),
    pool: () => {
      const s = pool.stats()
      const idle = Object.values(s.current.warm).reduce((a, b) => a + b, 0)
      return {
        hits: s.hits,
        misses: s.misses,
        creates: s.creates,
        reaped: s.reaped,
        leases: s.current.leases,
        handles: s.current.handles,
        idle,
      }
    },
  })
}

/** Counts an egress decision by tenant and verdict. */
export function countEgress(metrics: Metrics): (e: EgressAuditEvent) => void {
  return (e) => metrics.egressDecisions.inc({ tenant: e.tenant, verdict: e.verdict })
}

/** Observes a finished exec job's latency by provider, profile and outcome. */
export function countExecJob(metrics: Metrics): (e: ExecWorkerEvent) => void {
  return (e) => {
    if (e.type !== 'end') return
    const outcome = e.result?.status ?? 'error'
    metrics.execLatency.observe(
      { provider: e.job.providerId, profile: e.job.profile, outcome },
      e.durationMs / 1000,
    )
  }
}

/** Counts a finished agent run by tenant and finish reason, and its tokens. */
export function countAgentRun(metrics: Metrics): (r: AgentRunRecord) => void {
  return (r) => {
    metrics.agentRuns.inc({ tenant: r.tenant, finish_reason: r.finishReason ?? r.state })
    if (r.usage) {
      metrics.agentTokens.inc({ tenant: r.tenant, kind: 'input' }, r.usage.inputTokens)
      metrics.agentTokens.inc({ tenant: r.tenant, kind: 'output' }, r.usage.outputTokens)
    }
  }
}
