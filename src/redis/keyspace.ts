/**
 * @module
 * Every Redis name the service uses, in one table. `p` is the deployment prefix (config
 * `queue.prefix`, default `sbx`); several deployments or test runs share one Redis by prefix.
 * These are wire values: changing one strands the data and jobs already in Redis.
 *
 * | Owner                   | Base handed to it            | Keys and channels under it                                         |
 * |-------------------------|------------------------------|--------------------------------------------------------------------|
 * | BullMQ queues           | `p` (BullMQ `prefix`)        | `p:<queue>:*` (BullMQ's own) for each of {@link QUEUE_NAMES} and lanes |
 * | Fence records           | `p:<queue>:sbx`              | `:{<job>}:done/cancel/fence/out/err/log/logmeta`, `:job:<job>`, `:cancel` |
 * | Tenant job index        | `p:<queue>:sbx:index`        | one sorted set per tenant                                          |
 * | Tenant job slots        | `p:tenant-jobs:`             | one sorted set per tenant: the done-record keys of its live jobs (`redis` driver) |
 * | Request rate            | `p:rate:`                    | one hash per tenant: its token bucket (`quotas.requestsPerSecond`) |
 * | `redis` queue driver    | `p:<queue>:rq`               | `:{<job>}` (job hash), `:wait`, `:leases`, `:workers`, `:pending:<worker>` |
 * | Engines (lanes)         | `p:engines`                  | hash, `:drained`, `:place:<session>`, `:pending:<engine>`, `:job:<job>`, `:adopt:<engine>`, `:gateways:<engine>` |
 * | Session store           | `p:sessions:`                | `bindings`, `closed:<ref>`, `replaced`, `idle`, `warm:<pool>`, `lock:<name>`, `slot:<name>`… (see sessions/store/redis-scripts.ts) |
 * | Session directory       | `p:`                         | `directory:<tenant>`                                               |
 * | Snapshot directory      | `p:`                         | `snapshots:<tenant>`, `snapshot-leftovers:<engine>`                |
 * | Agent runs              | `p:`                         | `agent:run:<id>`, `agent:events:<id>`, channel `agent:changed:<id>` (the jobs: `sbx-agent-runs`) |
 * | E2B compatibility state | `p:e2b:`                     | `sandboxes`, `ends`, `procs:<sandbox>`                             |
 * | Circuit breaker         | `p`                          | `p:circuit:<provider>`                                             |
 * | Lifecycle events        | `p`                          | stream `p:lifecycle`                                               |
 */

/**
 * The fleet's job queues, under either Redis driver: routed commands (`sbx worker`) and agent runs
 * (`sbx worker --agent`), each a queue of its own job kind.
 */
export const QUEUE_NAMES = { exec: 'sbx-exec', agentRuns: 'sbx-agent-runs' } as const

/** One of {@link QUEUE_NAMES}. */
export type QueueName = (typeof QUEUE_NAMES)[keyof typeof QUEUE_NAMES]

/** The bases of {@link keyspace}: what each owner is handed, under one deployment prefix. */
export interface Keyspace {
  /** The deployment prefix itself (BullMQ's `prefix`; circuit breaker and lifecycle events append `:<name>`). */
  readonly prefix: string
  /** Base of the session store (`RedisSessionStore`). */
  readonly sessions: string
  /** Base of the session directory, snapshot directory and agent-run store (each appends its own names). */
  readonly records: string
  /** Base of the E2B compatibility state. */
  readonly e2b: string
  /** Key of the engine directory's hash (other engine keys append to it). */
  readonly engines: string
  /** Base of the fence records and channels of `queue` (a queue or lane name). */
  fences(queue: string): string
  /** Base of the tenant job index of `queue`. */
  jobIndex(queue: string): string
  /** Base of the jobs, waiting list, leases and workers of `queue` under the `redis` queue driver. */
  jobs(queue: string): string
  /** Base of the tenants' job slots (`quotas.maxConcurrentJobs`, fleet-wide under the `redis` driver). */
  readonly tenantJobs: string
  /** Base of the tenants' request buckets (`quotas.requestsPerSecond`, fleet-wide). */
  readonly rates: string
}

/** The key bases of the deployment prefixed `prefix` (see the table above). */
export function keyspace(prefix: string): Keyspace {
  return {
    prefix,
    sessions: `${prefix}:sessions:`,
    records: `${prefix}:`,
    e2b: `${prefix}:e2b:`,
    engines: `${prefix}:engines`,
    fences: (queue) => `${prefix}:${queue}:sbx`,
    jobIndex: (queue) => `${prefix}:${queue}:sbx:index`,
    jobs: (queue) => `${prefix}:${queue}:rq`,
    tenantJobs: `${prefix}:tenant-jobs:`,
    rates: `${prefix}:rate:`,
  }
}
