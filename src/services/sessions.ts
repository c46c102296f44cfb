import { z } from 'zod'
import { SandboxReplacementSchema } from '../queue/schemas.js'
import { SessionId } from './common.js'

/**
 * The body of `POST /v1/sessions`. With `snapshot` the session starts from that snapshot
 * ({@link SnapshotService.startSession}); without it, {@link SessionService.create}.
 */
export const SessionInput = z
  .object({
    id: SessionId.optional(),
    provider: z.string().min(1).default('docker'),
    profile: z.string().min(1).default('default'),
    /**
     * Start from this snapshot (`POST /v1/sessions/{id}/snapshots`): the session's sandboxes get its
     * filesystem changes and a copy of its workspace. provider and profile default to the snapshot's.
     */
    snapshot: z.string().min(1).max(256).optional(),
  })
  .strict()
export type SessionInput = z.infer<typeof SessionInput>

/** A sandbox session as the API shows it. */
export const SessionView = z.object({
  id: z.string(),
  provider: z.string(),
  profile: z.string(),
  /** Bound sandbox id, once the first call ran. */
  sandboxId: z.string().optional(),
  createdAt: z.number(),
  /**
   * Set when the session's sandbox was replaced by an empty one (its files are lost), until
   * `POST /v1/sessions/{id}/ack` or the session is deleted.
   */
  sandboxReplaced: SandboxReplacementSchema.optional(),
})
export type SessionView = z.infer<typeof SessionView>

/** Tenant-scoped sessions and their files. */
export interface SessionService {
  /**
   * Records a session. With `admit`, refuses (429 QUOTA_EXCEEDED) a session whose first use could not
   * get a sandbox, instead of recording one whose every call would be refused.
   */
  create(
    tenant: string,
    input: Omit<SessionInput, 'snapshot'>,
    opts?: { admit?: boolean },
  ): Promise<SessionView>
  list(tenant: string): Promise<SessionView[]>
  get(tenant: string, id: string): Promise<SessionView | undefined>
  /** Destroys its sandboxes. `false` when not the tenant's. */
  delete(tenant: string, id: string): Promise<boolean>
  /** Clears the session's `sandboxReplaced` notice; the view after it, or undefined when not the tenant's. */
  acknowledge(tenant: string, id: string): Promise<SessionView | undefined>
  /** Undefined when there is no such session; a missing file is `NOT_FOUND` naming the path. */
  readFile(tenant: string, id: string, path: string): Promise<Uint8Array | undefined>
  /** Undefined when there is no such session; else the session's `sandboxReplaced` notice, if any. */
  writeFile(
    tenant: string,
    id: string,
    path: string,
    data: Uint8Array,
  ): Promise<Pick<SessionView, 'sandboxReplaced'> | undefined>
}
