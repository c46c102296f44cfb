import { type E2B, NotFoundError, SandboxNotFoundError, type SandboxMetrics } from 'e2b'
import { AppError, type SandboxRef, type SandboxStats } from '../../src/sandbox/index.js'
import { type ErrorContext, mapE2BError } from './errors.js'

/**
 * E2B's own pause and resume, as the SPI's `pause` / `resume` (and its metrics as `stats`): `Sandbox.pause` (memory kept; a second
 * pause answers `false`, which is fine) and `Sandbox.connect`, which resumes a paused sandbox and
 * only ever extends its lifetime. A sandbox that is gone is `NOT_FOUND`, as the SPI states.
 */
export function e2bPause(client: E2B, requestTimeoutMs: number, errors: ErrorContext) {
  const call = async (ref: SandboxRef, what: string, fn: () => Promise<unknown>): Promise<void> => {
    try {
      await fn()
    } catch (err) {
      if (err instanceof SandboxNotFoundError || err instanceof NotFoundError)
        throw new AppError('NOT_FOUND', `sandbox ${ref.id} is gone (${what})`, { cause: err })
      throw mapE2BError(err, { what: `${what} sandbox ${ref.id}` }, errors)
    }
  }
  return {
    pause: (ref: SandboxRef) =>
      call(ref, 'pausing', () => client.Sandbox.pause(ref.id, { requestTimeoutMs })),
    resume: (ref: SandboxRef) =>
      call(ref, 'resuming', () => client.Sandbox.connect(ref.id, { requestTimeoutMs })),
    /** E2B's latest metric of the sandbox (`Sandbox.getMetrics`); undefined before its first. */
    async stats(ref: SandboxRef): Promise<SandboxStats | undefined> {
      let latest: SandboxMetrics | undefined
      await call(ref, 'reading the metrics of', async () => {
        latest = (await client.Sandbox.getMetrics(ref.id, { requestTimeoutMs })).at(-1)
      })
      if (!latest) return undefined
      return {
        cpuUsedPct: latest.cpuUsedPct,
        cpuCount: latest.cpuCount,
        memUsedBytes: latest.memUsed,
        memTotalBytes: latest.memTotal,
        memCacheBytes: latest.memCache ?? 0,
      }
    },
  }
}
