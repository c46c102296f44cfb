import type { Sandbox as RemoteSandbox } from '@daytonaio/sdk'
import { AppError } from '../../src/sandbox/index.js'

/** How the provider treats a Daytona sandbox state. */
export type StateClass = 'running' | 'transient' | 'settling' | 'resumable' | 'lost'

const TRANSIENT = new Set([
  'creating',
  'starting',
  'restoring',
  'pending_build',
  'building_snapshot',
  'pulling_snapshot',
  'resuming',
  'resizing',
  'snapshotting',
  'forking',
])
const SETTLING = new Set(['stopping', 'archiving', 'pausing'])
const RESUMABLE = new Set(['stopped', 'archived', 'paused'])
/** States of a sandbox stopped (or stopping) with its files kept: what ran in it is gone. */
const STOPPED = new Set([...SETTLING, ...RESUMABLE])

/**
 * `running`: commands can run. `transient`: on its way to running (wait for it). `settling`: on
 * its way to a stop, archive or pause (wait for it, then start it again). `resumable`: stopped with
 * its files kept (start it again). `lost`: destroyed, failed or going away.
 */
export function classifyState(state: string | undefined): StateClass {
  if (state === 'started') return 'running'
  if (state && TRANSIENT.has(state)) return 'transient'
  if (state && SETTLING.has(state)) return 'settling'
  if (state && RESUMABLE.has(state)) return 'resumable'
  return 'lost'
}

/** Whether the state is a stop (or archive, pause) that keeps the files. */
export function isStoppedState(state: string | undefined): boolean {
  return state !== undefined && STOPPED.has(state)
}

/** `SANDBOX_LOST` for a sandbox in a state commands cannot run in (and that will not change by waiting). */
export function lostError(sandboxId: string, remote: RemoteSandbox): AppError {
  const state = remote.state ?? 'unknown'
  if (isStoppedState(state)) {
    // Found so after a call failed: the stop came while it ran (or after the handle's last look).
    const auto = remote.autoStopInterval
      ? `Daytona stops a sandbox after ${remote.autoStopInterval} min without toolbox activity (its auto-stop), or on request`
      : 'stopped on request'
    return new AppError(
      'SANDBOX_LOST',
      `Daytona sandbox ${sandboxId} is ${state} (${auto}): what ran in it is gone, its files are kept; ` +
        'destroy it and create a new sandbox',
    )
  }
  const why = remote.errorReason ? ` (${remote.errorReason})` : ''
  if (state === 'destroyed' || state === 'destroying') {
    const auto =
      remote.autoDeleteInterval === 0
        ? ' (Daytona deletes a sandbox with auto-delete 0 as soon as it stops, e.g. after its auto-stop)'
        : ''
    return new AppError(
      'SANDBOX_LOST',
      `Daytona sandbox ${sandboxId} is ${state}${why}${auto}; create a new sandbox`,
    )
  }
  return new AppError(
    'SANDBOX_LOST',
    `Daytona sandbox ${sandboxId} is ${state}${why}; destroy it and create a new sandbox`,
  )
}

/** Whether the sandbox is destroyed or on its way there (listing is eventually consistent). */
export function isGoing(remote: RemoteSandbox): boolean {
  return remote.state === 'destroyed' || remote.state === 'destroying' || remote.desiredState === 'destroyed'
}
