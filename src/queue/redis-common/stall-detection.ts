/**
 * How fast a dead worker's job is found, for every consumer of the fleet (exec jobs under either
 * Redis driver, agent runs): its lock or lease lapses after `lockDurationMs` (a live worker renews it
 * every half of that) and the stalled check runs every `stalledIntervalMs`.
 */
export const STALL_DETECTION = { lockDurationMs: 4_000, stalledIntervalMs: 1_500 } as const

/** Stalled-job recovery and shutdown tuning of a consumer, under either Redis driver. */
export interface ConsumerTuning {
  /**
   * Lock (BullMQ) or lease (`redis`) of a running job (ms). A dead worker's job is put back after it
   * lapses and the next stalled check runs: at most about lockDurationMs + stalledIntervalMs. @default 4000
   */
  lockDurationMs?: number
  /** Period of the stalled-job check (ms). @default 1500 */
  stalledIntervalMs?: number
  /** Redeliveries of one job after which it is given up (reported `interrupted`). @default 3 */
  maxStalledCount?: number
  /** After aborting jobs at shutdown, wait this long for them to be handed back (ms). @default 5000 */
  abortGraceMs?: number
}

/** How a consumer rides out a Redis outage, under either driver. */
export const OUTAGE_HANDLING = {
  /**
   * Deliveries of one job after which a Redis outage no longer hands it back (it then ends `failed`
   * with the connection error), so a misclassified error cannot loop forever.
   */
  maxUnreachableHandbacks: 10,
  /** How long a job held during a Redis outage waits for Redis before it is handed back anyway (ms). */
  holdMs: 60_000,
  /**
   * Pause before fetching again after a connection error (ms); BullMQ's own default, 15 s, would keep
   * a worker idle that long after Redis is back.
   */
  fetchRetryDelayMs: 1_000,
} as const
