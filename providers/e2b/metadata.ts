/** Value of the owner label (`sandbox-router.owner`) on every sandbox the service creates. */
export const OWNER = 'sandbox-router'

/** Metadata keys that let `connect(ref)` rebuild a handle's settings in another process. */
export const META = {
  cwd: 'sandbox-router.cwd',
  maxExecs: 'sandbox-router.max-execs',
  idleTtlMs: 'sandbox-router.idle-ttl-ms',
} as const

/** A positive integer from a metadata value, else `fallback`. */
export function positiveInt(value: string | undefined, fallback: number): number {
  const n = Number(value)
  return Number.isInteger(n) && n > 0 ? n : fallback
}
