/**
 * Sessions this process found bound within the last {@link BOUND_SEEN_TTL_MS}: their next calls are
 * admitted without asking the store again (a round trip to Redis per routed command in a fleet). The
 * admission is advisory either way: a sandbox is only created by the worker's acquire, which claims
 * its slots atomically and refuses with the same `QUOTA_EXCEEDED` past a bound, so a session deleted
 * elsewhere within the window gets that answer from its job instead of before it. A session this
 * process closes is forgotten at once.
 */
export class RecentlyBound {
  private readonly seen = new Map<string, number>()

  /** Whether `session` was seen bound less than the window ago. */
  has(session: string, now: number): boolean {
    const until = this.seen.get(session)
    if (until === undefined) return false
    if (until > now) return true
    this.seen.delete(session)
    return false
  }

  /** Notes that `session` is bound now. */
  add(session: string, now: number): void {
    // A bound on memory, not on correctness: the next admission of a dropped session asks the store.
    if (this.seen.size >= MAX_RECENTLY_BOUND) this.seen.clear()
    this.seen.set(session, now + BOUND_SEEN_TTL_MS)
  }

  /** Forgets `session` (it was closed here). */
  forget(session: string): void {
    this.seen.delete(session)
  }
}

/** How long a session seen bound is admitted without a store read (ms). */
export const BOUND_SEEN_TTL_MS = 1_000
const MAX_RECENTLY_BOUND = 10_000
