import { createHash } from 'node:crypto'

/**
 * The job id of a tool call: `j` + the first 32 hex digits of sha256(tenant NUL callId).
 *
 * Deterministic, so resubmitting a call returns the same job and its result; hashed, because BullMQ
 * ids must not contain `:` nor be all digits, and callIds are caller-chosen text of any length.
 * Tenants are part of the hash, so two tenants' equal callIds never collide.
 */
export function deriveJobId(tenant: string, callId: string): string {
  return 'j' + createHash('sha256').update(tenant).update('\0').update(callId).digest('hex').slice(0, 32)
}

/** Whether `id` has the shape {@link deriveJobId} produces. */
export function isJobId(id: string): boolean {
  return /^j[0-9a-f]{32}$/.test(id)
}
