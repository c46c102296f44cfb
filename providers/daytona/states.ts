/** How the provider treats a Daytona sandbox state. */
export type StateClass = 'running' | 'transient' | 'resumable' | 'lost'

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
const RESUMABLE = new Set(['stopped', 'archived', 'paused'])

/**
 * `running`: commands can run. `transient`: on its way to running (wait for it). `resumable`:
 * stopped with its files kept (start it again). `lost`: destroyed, failed or going away.
 */
export function classifyState(state: string | undefined): StateClass {
  if (state === 'started') return 'running'
  if (state && TRANSIENT.has(state)) return 'transient'
  if (state && RESUMABLE.has(state)) return 'resumable'
  return 'lost'
}
