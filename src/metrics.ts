import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client'

/** Live values the metrics read at scrape time. */
export interface MetricsSources {
  /** Jobs waiting + running, by queue. */
  queueDepth?: () => Promise<{ waiting: number; active: number }>
  /** Session pool counters (cumulative) and sizes (current). */
  pool?: () => {
    hits: number
    misses: number
    creates: number
    reaped: number
    leases: number
    handles: number
    idle: number
  }
  /** Each provider's circuit (routing policies skip open ones): 0 closed, 1 open, 0.5 half-open. */
  circuits?: () => Promise<Record<string, 'closed' | 'open' | 'half-open'>>
  /** The fleet's Docker engines (`queue.engineRouting`): their load, cap and state. */
  engines?: () => Promise<
    readonly {
      id: string
      running: number
      cap?: number
      memoryBytes?: number
      reservedBytes?: number
      state: 'live' | 'down'
      draining: boolean
      /** Live worker gateways of the engine (`fleet.gateway`). */
      gateways?: number
    }[]
  >
}

/**
 * The Prometheus metrics of one process: queue depth, exec latency, pool hits/misses/size, agent-run
 * tokens, plus Node's default process metrics.
 */
export class Metrics {
  readonly registry = new Registry()
  readonly execLatency: Histogram<'provider' | 'profile' | 'outcome'>
  readonly agentTokens: Counter<'tenant' | 'kind'>
  readonly agentRuns: Counter<'tenant' | 'finish_reason'>
  readonly httpRequests: Counter<'method' | 'route' | 'status'>
  /** Egress proxy decisions (docs/egress.md): `allow` or `deny`. */
  readonly egressDecisions: Counter<'tenant' | 'verdict'>

  constructor(sources: MetricsSources = {}) {
    const registers = [this.registry]
    collectDefaultMetrics({ register: this.registry, prefix: 'sbx_process_' })
    this.execLatency = new Histogram({
      name: 'sbx_exec_duration_seconds',
      help: 'Routed command latency from submit to result',
      labelNames: ['provider', 'profile', 'outcome'],
      buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300],
      registers,
    })
    this.agentTokens = new Counter({
      name: 'sbx_agent_tokens_total',
      help: 'Agent-run tokens',
      labelNames: ['tenant', 'kind'],
      registers,
    })
    this.agentRuns = new Counter({
      name: 'sbx_agent_runs_total',
      help: 'Finished agent runs',
      labelNames: ['tenant', 'finish_reason'],
      registers,
    })
    this.egressDecisions = new Counter({
      name: 'sbx_egress_decisions_total',
      help: 'Egress proxy decisions on sandbox connections',
      labelNames: ['tenant', 'verdict'],
      registers,
    })
    this.httpRequests = new Counter({
      name: 'sbx_http_requests_total',
      help: 'HTTP requests',
      labelNames: ['method', 'route', 'status'],
      registers,
    })
    const { queueDepth, pool, circuits, engines } = sources
    type EngineLoadView = Awaited<ReturnType<NonNullable<MetricsSources['engines']>>>[number]
    /** A gauge with one series per engine, read from the engines' last reports at each scrape. */
    const engineGauge = (name: string, help: string, value: (e: EngineLoadView) => number | undefined) =>
      new Gauge({
        name,
        help,
        labelNames: ['engine'],
        registers,
        async collect() {
          this.reset()
          for (const e of (await engines?.().catch(() => undefined)) ?? []) {
            const v = value(e)
            if (v !== undefined) this.set({ engine: e.id }, v)
          }
        },
      })
    engineGauge(
      'sbx_engine_sandboxes',
      'Sandboxes running on each Docker engine of the fleet, as its workers last reported (engine routing)',
      (e) => e.running,
    )
    engineGauge(
      'sbx_engine_capacity',
      "Each Docker engine's sandbox cap (providers.docker.maxSandboxes; absent: unbounded)",
      (e) => e.cap,
    )
    engineGauge(
      'sbx_engine_memory_reserved_bytes',
      "The memory limits of each Docker engine's sandboxes, summed, as its workers last reported (engine routing)",
      (e) => e.reservedBytes,
    )
    engineGauge(
      'sbx_engine_memory_bytes',
      "Memory each Docker engine's sandboxes may reserve: providers.docker.memoryCapacityMb, else the engine's own memory",
      (e) => e.memoryBytes,
    )
    engineGauge(
      'sbx_engine_gateways',
      "Live worker gateways of each Docker engine (fleet.gateway): the workers through which the API reaches the engine's sessions",
      (e) => e.gateways,
    )
    new Gauge({
      name: 'sbx_engine_up',
      help: 'Each Docker engine: 1 live (reached by a worker, healthy), 0 down; `draining` 1 after sbx engine drain',
      labelNames: ['engine', 'draining'],
      registers,
      async collect() {
        this.reset()
        for (const e of (await engines?.().catch(() => undefined)) ?? [])
          this.set({ engine: e.id, draining: e.draining ? '1' : '0' }, e.state === 'live' ? 1 : 0)
      },
    })
    new Gauge({
      name: 'sbx_provider_circuit_open',
      help: "A provider's circuit: 0 closed, 1 open (routing policies skip it), 0.5 half-open (one probe may try)",
      labelNames: ['provider'],
      registers,
      async collect() {
        if (!circuits) return
        const states = await circuits().catch(() => undefined)
        for (const [provider, state] of Object.entries(states ?? {}))
          this.set({ provider }, state === 'open' ? 1 : state === 'half-open' ? 0.5 : 0)
      },
    })
    new Gauge({
      name: 'sbx_queue_depth',
      help: 'Exec jobs waiting or running',
      labelNames: ['state'],
      registers,
      async collect() {
        if (!queueDepth) return
        const d = await queueDepth().catch(() => undefined)
        if (!d) return
        this.set({ state: 'waiting' }, d.waiting)
        this.set({ state: 'active' }, d.active)
      },
    })
    type PoolStats = NonNullable<ReturnType<NonNullable<MetricsSources['pool']>>>
    // Cumulative pool counters are read from the pool at scrape time: a Counter re-based on each collect.
    const poolCounter = (name: string, help: string, pick: (p: PoolStats) => number) =>
      new Counter({
        name,
        help,
        registers,
        collect() {
          const p = pool?.()
          if (!p) return
          this.reset()
          this.inc(pick(p))
        },
      })
    const poolGauge = (name: string, help: string, pick: (p: PoolStats) => number) =>
      new Gauge({
        name,
        help,
        registers,
        collect() {
          const p = pool?.()
          if (p) this.set(pick(p))
        },
      })
    poolCounter('sbx_pool_hits_total', 'Acquires served by a warm or bound sandbox', (p) => p.hits)
    poolCounter('sbx_pool_misses_total', 'Acquires that had to create a sandbox', (p) => p.misses)
    poolCounter('sbx_pool_creates_total', 'Sandboxes created', (p) => p.creates)
    poolCounter('sbx_pool_reaped_total', 'Sandboxes destroyed by the reaper', (p) => p.reaped)
    poolGauge('sbx_pool_leases', 'Sandbox leases held in this process', (p) => p.leases)
    poolGauge('sbx_pool_handles', 'Open sandbox connections in this process', (p) => p.handles)
    poolGauge('sbx_pool_idle', 'Warm sandboxes ready', (p) => p.idle)
  }

  /**
   * The text exposition format: every series, or with `scope` only the series labelled with
   * `tenant="<scope.tenant>"` (a non-admin key's view: no fleet-wide series, since queue depth,
   * latency and pool figures sum every tenant's activity).
   */
  async text(scope?: { readonly tenant: string }): Promise<string> {
    if (!scope) return this.registry.metrics()
    return tenantExposition(await this.registry.getMetricsAsJSON(), scope.tenant)
  }
}

type MetricJson = Awaited<ReturnType<Registry['getMetricsAsJSON']>>[number]

/** The exposition of the series of `metrics` whose `tenant` label is `tenant` (others left out). */
function tenantExposition(metrics: readonly MetricJson[], tenant: string): string {
  const out: string[] = []
  for (const m of metrics) {
    const values = m.values.filter((v) => v.labels['tenant'] === tenant)
    if (values.length === 0) continue
    out.push(`# HELP ${m.name} ${escapeHelp(m.help)}`, `# TYPE ${m.name} ${m.type}`)
    for (const v of values) {
      const name = (v as { metricName?: string }).metricName ?? m.name
      const labels = Object.entries(v.labels)
        .filter(([, x]) => x !== undefined)
        .map(([k, x]) => `${k}="${escapeLabel(String(x))}"`)
        .join(',')
      out.push(`${name}${labels ? `{${labels}}` : ''} ${formatValue(v.value)}`)
    }
  }
  return out.length ? `${out.join('\n')}\n` : ''
}

const escapeHelp = (s: string): string => s.replace(/\\/g, '\\\\').replace(/\n/g, '\\n')
const escapeLabel = (s: string): string => s.replace(/\\/g, '\\\\').replace(/\n/g, '\\n').replace(/"/g, '\\"')
const formatValue = (v: number): string =>
  Number.isNaN(v) ? 'NaN' : v === Infinity ? '+Inf' : v === -Infinity ? '-Inf' : String(v)
