/*
 * What every provider does the same way at its edge: refuse profiles and refs of another provider,
 * and stamp the service's labels on what it creates.
 */
import { AppError } from '../errors.js'
import type { ResolvedProfile } from './profiles.js'
import { LABELS } from './types.js'
import type { Labels, SandboxRef } from './types.js'

/** Value of the owner label (`sandbox-router.owner`) on every sandbox the service creates. */
export const OWNER = 'sandbox-router'

/** Labels that let `connect(ref)` rebuild a handle's settings in another process. */
export const SETTINGS_LABELS = {
  cwd: 'sandbox-router.cwd',
  maxExecs: 'sandbox-router.max-execs',
} as const

/** Throws `CONFIG_INVALID` unless `profile` targets `providerId`. */
export function assertProfileFor(providerId: string, profile: ResolvedProfile): void {
  if (profile.provider !== providerId) {
    throw new AppError(
      'CONFIG_INVALID',
      `profile ${profile.name} targets provider '${profile.provider}', not '${providerId}'`,
    )
  }
}

/** Throws `CONFIG_INVALID` unless `ref` belongs to `providerId`. */
export function assertRefFor(providerId: string, ref: SandboxRef): void {
  if (ref.providerId !== providerId) {
    throw new AppError(
      'CONFIG_INVALID',
      `ref ${ref.id} belongs to provider '${ref.providerId}', not '${providerId}'`,
    )
  }
}

/**
 * The caller's labels plus the service's own: owner, profile, the creating instance (when the
 * provider was given one) and the settings `connect` reads back (cwd, concurrency bound).
 */
export function ownedLabels(labels: Labels, profile: ResolvedProfile, instanceId?: string): Labels {
  return {
    ...labels,
    [LABELS.owner]: OWNER,
    [LABELS.profile]: profile.name,
    ...(instanceId ? { [LABELS.instance]: instanceId } : {}),
    [SETTINGS_LABELS.cwd]: profile.cwd,
    [SETTINGS_LABELS.maxExecs]: String(profile.maxConcurrentExecs),
  }
}

/** `promise`, or the abort reason as soon as `signal` aborts (the promise itself keeps going). */
export function raceAbort<T>(promise: Promise<T>, signal: AbortSignal | undefined): Promise<T> {
  if (!signal) return promise
  if (signal.aborted) return Promise.reject(signal.reason as unknown)
  return new Promise<T>((resolve, reject) => {
    const onAbort = (): void => reject(signal.reason as unknown)
    signal.addEventListener('abort', onAbort, { once: true })
    promise.then(
      (value) => {
        signal.removeEventListener('abort', onAbort)
        resolve(value)
      },
      (err: unknown) => {
        signal.removeEventListener('abort', onAbort)
        reject(err)
      },
    )
  })
}
