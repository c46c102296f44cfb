import type { CreateBackoff } from './options.js'

/**
 * Delay before retry number `attempt` (0-based): exponential, capped, with "equal jitter" — half
 * fixed, half random — so fleet workers failing together spread out yet never retry at once.
 */
export function backoffDelayMs(
  attempt: number,
  backoff: CreateBackoff,
  random: () => number = Math.random,
): number {
  const cap = Math.min(backoff.maxMs, backoff.initialMs * backoff.factor ** attempt)
  return Math.round(cap / 2 + random() * (cap / 2))
}

/** Resolves after `ms`, or rejects with the signal's reason when it aborts first. */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason as Error)
    const onAbort = () => {
      clearTimeout(timer)
      reject(signal?.reason as Error)
    }
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort)
      resolve()
    }, ms)
    signal?.addEventListener('abort', onAbort, { once: true })
  })
}
