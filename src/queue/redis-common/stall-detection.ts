/**
 * How fast a dead worker's job is found, for every consumer of the fleet (exec jobs under either
 * Redis driver, agent runs): its lock or lease lapses after `lockDurationMs` (a live worker renews it
 * every half of that) and the stalled check runs every `stalledIntervalMs`.
 */
export const STALL_DETECTION = { lockDurationMs: 4_000, stalledIntervalMs: 1_500 } as const
