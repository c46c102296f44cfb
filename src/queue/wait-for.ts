import { AppError } from '../errors.js'

/** The error a wait rejects with when no result arrived in time. */
export function waitTimeoutError(jobId: string, timeoutMs: number): AppError {
  return new AppError(
    'QUEUE_UNAVAILABLE',
    `Job ${jobId} did not finish within ${timeoutMs} ms; check that a worker is running (\`sbx worker\`) ` +
      'and not saturated, or raise the timeout.',
    { retryable: true },
  )
}

/**
 * Wraps a pending wait: resolves through `settle`, rejects on `timeoutMs` or `signal`, and always runs
 * `cleanup` once.
 */
export function boundedWait<T>(
  jobId: string,
  opts: { timeoutMs: number; signal?: AbortSignal },
  register: (settle: (value: T) => void, fail: (err: unknown) => void) => () => void,
): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    opts.signal?.throwIfAborted()
    let done = false
    // A holder, not a `let`: `register` may settle synchronously, before its return value exists.
    const hold: { cleanup?: () => void } = {}
    const finish = (fn: () => void): void => {
      if (done) return
      done = true
      clearTimeout(timer)
      opts.signal?.removeEventListener('abort', onAbort)
      hold.cleanup?.()
      fn()
    }
    const onAbort = (): void => finish(() => reject(opts.signal?.reason))
    const timer = setTimeout(
      () => finish(() => reject(waitTimeoutError(jobId, opts.timeoutMs))),
      opts.timeoutMs,
    )
    opts.signal?.addEventListener('abort', onAbort, { once: true })
    hold.cleanup = register(
      (v) => finish(() => resolve(v)),
      (e) => finish(() => reject(e)),
    )
    if (done) hold.cleanup()
  })
}
