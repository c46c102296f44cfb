/** A silent command still gets a progress notification this often (ms), so clients that reset their timeout on progress keep waiting. */
export const PROGRESS_HEARTBEAT_MS = 10_000

/** One `notifications/progress` as the SDK handler's `sendNotification` takes it. */
export interface ProgressNotification {
  method: 'notifications/progress'
  params: { progressToken: string | number; progress: number; message?: string }
}

/** Live output of one tool call, as progress notifications; `stop()` when the call ends. */
export interface ProgressStream {
  readonly onChunk: (chunk: string) => void
  stop(): void
}

/**
 * Turns a call's live output into `notifications/progress` for `token`: each chunk is a `message`,
 * and a heartbeat without one is sent every `heartbeatMs` of the call. `progress` counts the output's
 * characters plus one per heartbeat, so it grows with every notification as the spec asks.
 */
export function createProgressStream(
  token: string | number,
  send: (n: ProgressNotification) => Promise<void>,
  heartbeatMs = PROGRESS_HEARTBEAT_MS,
): ProgressStream {
  let progress = 0
  const notify = (message?: string): void => {
    const params = { progressToken: token, progress, ...(message === undefined ? {} : { message }) }
    // Best effort: the result carries the whole output; a client gone away is not the command's failure.
    send({ method: 'notifications/progress', params }).catch(() => undefined)
  }
  const timer = setInterval(() => {
    progress += 1
    notify()
  }, heartbeatMs)
  timer.unref()
  return {
    onChunk: (chunk) => {
      progress += chunk.length
      notify(chunk)
    },
    stop: () => clearInterval(timer),
  }
}
