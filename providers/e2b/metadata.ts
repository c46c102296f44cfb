import { SETTINGS_LABELS } from '../../src/sandbox/provider-kit.js'

export { OWNER } from '../../src/sandbox/provider-kit.js'

/** Metadata keys that let `connect(ref)` rebuild a handle's settings in another process. */
export const META = {
  ...SETTINGS_LABELS,
  idleTtlMs: 'sandbox-router.idle-ttl-ms',
} as const

/** A positive integer from a metadata value, else `fallback`. */
export function positiveInt(value: string | undefined, fallback: number): number {
  const n = Number(value)
  return Number.isInteger(n) && n > 0 ? n : fallback
}
