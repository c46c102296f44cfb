import { AppError } from '../errors.js'

/**
 * A counting semaphore whose waiters can be aborted: how providers bound the commands one sandbox
 * runs at once (`profile.maxConcurrentExecs`).
 */
export class Semaphore {
  private available: number
  private readonly waiters: Array<() => void> = []

  constructor(readonly size: number) {
    this.available = size
  }

  /** Resolves with a release function (idempotent) once a slot is free. */
  async acquire(signal?: AbortSignal): Promise<() => void> {
    signal?.throwIfAborted()
    if (this.available > 0) {
      this.available--
    } else {
      await new Promise<void>((resolve, reject) => {
        const grant = (): void => {
          signal?.removeEventListener('abort', onAbort)
          resolve()
        }
        const onAbort = (): void => {
          const i = this.waiters.indexOf(grant)
          if (i >= 0) this.waiters.splice(i, 1)
          reject(signal?.reason ?? new AppError('JOB_CANCELLED', 'aborted while waiting for a free slot'))
        }
        signal?.addEventListener('abort', onAbort, { once: true })
        this.waiters.push(grant)
      })
    }
    let released = false
    return () => {
      if (released) return
      released = true
      const next = this.waiters.shift()
      if (next) next()
      else this.available++
    }
  }
}
