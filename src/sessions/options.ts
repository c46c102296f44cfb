import { z } from 'zod'

/** Exponential backoff between failed sandbox creates (full jitter). */
export const CreateBackoffSchema = z
  .object({
    /** First delay (ms). @default 100 */
    initialMs: z.number().int().positive().default(100),
    /** Upper bound of one delay (ms). @default 5000 */
    maxMs: z.number().int().positive().default(5_000),
    /** Growth per attempt. @default 2 */
    factor: z.number().min(1).default(2),
  })
  .strict()

/** One (provider, profile) pool to keep warm from the start, before any acquire names it. */
export const PrewarmSchema = z.object({ providerId: z.string().min(1), profile: z.string().min(1) }).strict()

/** Options of the session pool (the store and providers are passed beside them). */
export const SessionPoolOptionsSchema = z
  .object({
    /**
     * Value of the scope label put on every sandbox this pool creates; `reap()` only looks at
     * sandboxes of its scope. Pools sharing one store must share the scope. @default 'default'
     */
    scope: z.string().min(1).max(63).default('default'),
    /** Identifies this process in labels and lock tokens. @default a random id */
    instanceId: z.string().min(1).optional(),
    /** Default `acquire` deadline (ms). @default 30000 */
    acquireTimeoutMs: z.number().int().positive().default(30_000),
    /** Creates tried per acquire before `SANDBOX_CREATE_FAILED` (retryable errors only). @default 5 */
    createAttempts: z.number().int().positive().default(5),
    createBackoff: CreateBackoffSchema.default({ initialMs: 100, maxMs: 5_000, factor: 2 }),
    /** Sandboxes (bound, ephemeral and being created) one tenant may hold across the fleet. @default 64 */
    maxSandboxesPerTenant: z.number().int().positive().default(64),
    /**
     * Per provider id: sandboxes of that provider (every profile and tenant, warm ones included)
     * across the fleet, e.g. what one Docker engine holds. A provider not listed is unbounded. @default {}
     */
    maxSandboxesPerProvider: z.record(z.string().min(1), z.number().int().positive()).default({}),
    /**
     * Per provider id: the engine this process reaches (a fleet over many Docker engines). Its warm
     * pools and its `maxSandboxesPerProvider` count are kept per engine, its sandboxes carry the
     * engine label, and a session bound on another engine (down or drained) is rebound here with
     * `sandboxReplaced` (files lost). @default {}
     */
    providerEngines: z.record(z.string().min(1), z.string().min(1)).default({}),
    /** A lease not renewed for this long is dead (its worker crashed). Renewed every third of it. @default 30000 */
    leaseTtlMs: z.number().int().min(100).default(30_000),
    /** TTL of the per-session bind lock; renewed while the holder creates. @default 15000 */
    lockTtlMs: z.number().int().min(100).default(15_000),
    /** First poll interval of an acquire waiting on another binder (ms); doubles up to 200. @default 5 */
    lockPollMs: z.number().int().positive().default(5),
    /** Period of idle eviction, warm expiry and warm refill (ms). 0 disables the timer. @default 5000 */
    maintenanceIntervalMs: z.number().int().min(0).default(5_000),
    /** Period of `reap()` (ms). 0 disables the timer (call `reap()` yourself). @default 60000 */
    reapIntervalMs: z.number().int().min(0).default(60_000),
    /** `reap()` spares sandboxes younger than this (ms), so a create in flight is not reaped. @default 60000 */
    reapGraceMs: z.number().int().min(0).default(60_000),
    /** Delay between a claim and the refill it triggers (ms), so a burst of claims refills once. @default 50 */
    refillDelayMs: z.number().int().min(0).default(50),
    /** Warm sandboxes created at once per pool while refilling. @default 2 */
    refillConcurrency: z.number().int().positive().default(2),
    /** A cached connection to a sandbox unused this long is closed (the sandbox stays). @default 300000 */
    handleIdleMs: z.number().int().positive().default(300_000),
    /** Pools to keep warm from the start (their profile's `pool.minIdle`). @default [] */
    prewarm: z.array(PrewarmSchema).default([]),
  })
  .strict()

/** Options as callers write them (every field optional). */
export type SessionPoolOptions = z.input<typeof SessionPoolOptionsSchema>
/** Options with defaults filled in. */
export type ResolvedSessionPoolOptions = z.output<typeof SessionPoolOptionsSchema>
/** Backoff settings with defaults filled in. */
export type CreateBackoff = z.output<typeof CreateBackoffSchema>
