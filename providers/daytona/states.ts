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
