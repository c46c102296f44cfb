/** A fixed number of slots; waiters queue in order and leave the queue when their signal aborts. */
export class Slots {
  private free: number
  private readonly queue: Array<{ grant: () => void }> = []

  constructor(size: number) {
    this.free = size
  }

  /** Resolves with an idempotent release function once a slot is free; rejects with the abort reason. */
  async take(signal?: AbortSignal): Promise<() => void> {
    signal?.throwIfAborted()
    if (this.free > 0) {
      this.free--
    } else {
      await new Promise<void>((resolve, reject) => {
        const waiter = {
          grant: (): void => {
            signal?.removeEventListener('abort', onAbort)
            resolve()
          },
        }
        const onAbort = (): void => {
          const at = this.queue.indexOf(waiter)
          if (at >= 0) this.queue.splice(at, 1)
          reject(signal?.reason as unknown)
        }
        signal?.addEventListener('abort', onAbort, { once: true })
        this.queue.push(waiter)
      })
    }
    let done = false
    return () => {
      if (done) return
      done = true
      const next = this.queue.shift()
      if (next) next.grant()
      else this.free++
    }
  }
}
