/** A counting semaphore whose waiters can be aborted (bounds the commands one sandbox runs at once). */
export class Semaphore {
  private free: number
  private readonly queue: Array<() => void> = []

  constructor(size: number) {
    this.free = size
  }

  /** Resolves with an idempotent release function once a slot is free; rejects with the abort reason. */
  async acquire(signal?: AbortSignal): Promise<() => void> {
    signal?.throwIfAborted()
    if (this.free > 0) this.free--
    else {
      await new Promise<void>((resolve, reject) => {
        const grant = (): void => {
          signal?.removeEventListener('abort', onAbort)
          resolve()
        }
        const onAbort = (): void => {
          const i = this.queue.indexOf(grant)
          if (i >= 0) this.queue.splice(i, 1)
          reject(signal?.reason)
        }
        signal?.addEventListener('abort', onAbort, { once: true })
        this.queue.push(grant)
      })
    }
    let released = false
    return () => {
      if (released) return
      released = true
      const next = this.queue.shift()
      if (next) next()
      else this.free++
    }
  }
}
