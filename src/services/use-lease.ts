import { AppError } from '../errors.js'
import type { Lease } from '../sessions/types.js'

/**
 * Runs `fn` on a leased sandbox and releases the lease after it: as `lost` (with the reason) when
 * `fn` failed with SANDBOX_LOST, so that the session's next call gets a new sandbox, else as `ok`.
 */
export async function useLease<T>(lease: Lease, fn: (lease: Lease) => Promise<T>): Promise<T> {
  let outcome: 'ok' | 'lost' = 'ok'
  let reason: string | undefined
  try {
    return await fn(lease)
  } catch (err) {
    if (err instanceof AppError && err.code === 'SANDBOX_LOST') {
      outcome = 'lost'
      reason = err.message
    }
    throw err
  } finally {
    await lease.release(outcome, reason)
  }
}
