import type { ProfileInput } from '../../src/sandbox/profiles.js'

/** The profile every command of the load bench runs on (workers and producer register the same). */
export const LOAD_PROFILE = 'load'

/** The load bench's Docker profile, sized for `sessions` bound sandboxes. */
export function loadProfile(sessions: number): ProfileInput {
  return {
    provider: 'docker',
    defaultTimeoutMs: 15_000,
    maxTimeoutMs: 30_000,
    pool: { minIdle: 0, maxSize: Math.max(32, sessions * 2) },
  }
}

/** The profiles a load worker registers. */
export function loadProfiles(sessions: number): Record<string, ProfileInput> {
  return { [LOAD_PROFILE]: loadProfile(sessions) }
}
