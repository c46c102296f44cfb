import type Docker from 'dockerode'
import { AppError, type SandboxRef } from '../../src/sandbox/index.js'
import { engineStatus, mapEngineError } from './errors.js'

/**
 * What a failed destroy of a sandbox ends in: a container already gone (404) is fine; one whose
 * removal is already in progress (409) is waited for, so callers see it gone (`UNAVAILABLE`,
 * retryable, after 30 s); anything else is mapped.
 */
export async function removalFailed(docker: Docker, ref: SandboxRef, err: unknown): Promise<void> {
  const status = engineStatus(err)
  if (status === 404) return
  // 409: a removal is already in progress; wait for it so callers see the sandbox gone.
  if (status !== 409) throw mapEngineError(err, `destroying sandbox ${ref.id}`)
  const deadline = Date.now() + 30_000
  while (Date.now() < deadline) {
    const gone = await docker
      .getContainer(ref.id)
      .inspect()
      .then(
        () => false,
        (e: unknown) => engineStatus(e) === 404,
      )
    if (gone) return
    await new Promise((r) => setTimeout(r, 100))
  }
  throw new AppError('UNAVAILABLE', `sandbox ${ref.id} is still being removed after 30 s; retry destroy`, {
    retryable: true,
  })
}

/** The engine's pause / unpause; 404 is NOT_FOUND, 409 (already in that state) is fine. */
export async function freezeContainer(docker: Docker, ref: SandboxRef, paused: boolean): Promise<void> {
  const c = docker.getContainer(ref.id)
  try {
    await (paused ? c.pause() : c.unpause())
  } catch (err) {
    const status = engineStatus(err)
    if (status === 404) throw new AppError('NOT_FOUND', `sandbox ${ref.id} is gone`, { cause: err })
    if (status === 409) {
      const state = await c.inspect().then(
        (i) => i.State,
        () => undefined,
      )
      if (state?.Running && state.Paused === paused) return
    }
    throw mapEngineError(err, `${paused ? 'pausing' : 'resuming'} sandbox ${ref.id}`)
  }
}
