export type { AcquireOptions, Lease, LeaseOutcome, SessionKey, SessionPool } from './types.js'
export { createSessionPool, SandboxSessionPool } from './pool.js'
export type { CreateSessionPoolOptions } from './pool.js'
export type { PoolErrorHandler } from './core.js'
export { SessionPoolOptionsSchema, CreateBackoffSchema, PrewarmSchema } from './options.js'
export type { CreateBackoff, ResolvedSessionPoolOptions, SessionPoolOptions } from './options.js'
export { CREATE_LATENCY_BUCKETS_MS } from './stats.js'
export type { AcquireOutcome, EvictionReason, LatencyHistogram, PoolStats } from './stats.js'
export {
  POOL_LABELS,
  OWNER,
  EPHEMERAL_SESSION,
  WARM_SESSION,
  sessionHash,
  poolKey,
  scopeLabels,
} from './keys.js'
export { backoffDelayMs } from './backoff.js'
export { MemorySessionStore } from './store/memory.js'
export { RedisSessionStore } from './store/redis.js'
export type { RedisSessionStoreOptions } from './store/redis.js'
export type {
  BindingRecord,
  BindLock,
  ClaimQuota,
  LeaseRenewal,
  LeaseSpec,
  LeaseTouch,
  SessionStore,
  SlotClaim,
  SlotReservation,
  UseOrLockResult,
  WarmClaim,
  WarmEntry,
} from './store/types.js'
