/*
 * What every provider does the same way at its edge: refuse profiles and refs of another provider,
 * and stamp the service's labels on what it creates (the label schema and `ownedLabels` live in
 * labels.ts; re-exported here for the providers that import them from this file).
 */
import { AppError } from '../errors.js'
import type { ResolvedProfile } from './profiles.js'
import type { SandboxRef } from './types.js'

export { OWNER, SETTINGS_LABELS, ownedLabels } from './labels.js'

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
