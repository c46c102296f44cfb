import type { Daytona, Sandbox as RemoteSandbox } from '@daytonaio/sdk'
import { AppError, raceAbort } from '../../src/sandbox/index.js'
import { type ErrorScope, isSandboxGone, mapDaytonaError } from './errors.js'
import type { ResolvedDaytonaProviderOptions } from './options.js'
import { classifyState, lostError } from './states.js'

/** How the provider finds a sandbox lost and brings a stopped one back (shared with its handles). */
export interface Reviver {
  /** `SANDBOX_LOST` when the sandbox is gone or not running, else undefined (state unknown or fine). */
  checkLost(sandboxId: string): Promise<AppError | undefined>
  /**
   * Brings a sandbox to `started` if it can be: waits for a create or start, waits for a stop to
   * end and starts it again (files kept, processes gone), starts a stopped or archived one;
   * `SANDBOX_LOST` for one that is gone or failed. Re-reads the state first when `refresh`.
   * Says whether it found the sandbox running or (re)started it.
   */
  revive(
    remote: RemoteSandbox,
    what: string,
    signal?: AbortSignal,
    refresh?: boolean,
  ): Promise<'running' | 'restarted'>
}

/** The {@link Reviver} of one provider: its client, error scope and create timeout. */
export function daytonaReviver(
  daytona: Daytona,
  scope: ErrorScope,
  opts: ResolvedDaytonaProviderOptions,
): Reviver {
  async function checkLost(sandboxId: string): Promise<AppError | undefined> {
    try {
      const remote = await daytona.get(sandboxId)
      const state = classifyState(remote.state)
      if (state === 'running' || state === 'transient') return undefined
      return lostError(sandboxId, remote)
    } catch (err) {
      return isSandboxGone(err) ? mapDaytonaError(err, scope, 'checking the sandbox', sandboxId) : undefined
    }
  }

  async function revive(
    remote: RemoteSandbox,
    what: string,
    signal?: AbortSignal,
    refresh = true,
  ): Promise<'running' | 'restarted'> {
    const deadline = Date.now() + opts.createTimeoutMs
    const left = (): number => Math.max(0.001, (deadline - Date.now()) / 1000)
    try {
      if (refresh) await raceAbort(remote.refreshData(), signal)
      for (let pause = 100; ; pause = Math.min(pause * 2, 1000)) {
        switch (classifyState(remote.state)) {
          case 'running':
            return pause === 100 ? 'running' : 'restarted'
          case 'transient':
            await raceAbort(remote.waitUntilStarted(left()), signal)
            return 'restarted'
          case 'settling':
            // Stopping, archiving or pausing: once it has, it can be started again.
            if (Date.now() > deadline) throw lostError(remote.id, remote)
            await raceAbort(new Promise((resolve) => setTimeout(resolve, pause)), signal)
            await raceAbort(remote.refreshData(), signal)
            continue
          case 'resumable':
            // Auto-stop keeps the files: start it again rather than lose the session's state.
            await raceAbort(remote.start(left()), signal)
            return 'restarted'
          case 'lost':
            throw lostError(remote.id, remote)
        }
      }
    } catch (err) {
      signal?.throwIfAborted()
      if (err instanceof AppError) throw err
      // A start refused because the sandbox went meanwhile (auto-delete) is a lost sandbox.
      const lost = isSandboxGone(err) ? undefined : await checkLost(remote.id)
      throw lost ?? mapDaytonaError(err, scope, what, remote.id)
    }
  }

  return { checkLost, revive }
}
