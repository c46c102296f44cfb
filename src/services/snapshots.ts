import type { SessionView } from './sessions.js'

/** A snapshot as the API shows it (records: src/services/snapshot-directory.ts). */
export interface SnapshotView {
  id: string
  provider: string
  profile: string
  /** The session it was taken from. */
  sessionId: string
  createdAt: number
  /**
   * `creating` while it is being taken; `ready` once sessions can start from it; `failed` when it
   * was still being taken past the bound (the process taking it stopped): see `reason`.
   */
  state: 'creating' | 'ready' | 'failed'
  /** Bytes of the captured workspace. */
  workspaceBytes: number
  /** Why a `failed` snapshot failed, and what to do. */
  reason?: string
  /** The name it was given (E2B's `createSnapshot({ name })`). */
  name?: string
}

/** Options of {@link SnapshotService.create} and {@link SnapshotService.fork}. */
export interface CaptureOptions {
  /** A name to keep with the snapshot. */
  name?: string
  /**
   * A sandbox without persistent workspace is captured too: the files of its in-memory mounts
   * (workspace, /tmp, cwd), which sessions started from it get at their sandboxes' start (the E2B
   * endpoint's snapshots). Without it such a session is a 400. @default false
   */
  tmpfs?: boolean
}

/** What `POST /v1/sessions/{id}/fork` made. */
export interface ForkResult {
  /** The new sessions, each with its own copy of the source's workspace. */
  sessions: SessionView[]
  /** The snapshot the forks were made from, when kept (`keepSnapshot`). */
  snapshot?: SnapshotView
}

/**
 * Tenant-scoped snapshots of sessions (docs/workspaces.md). Methods answer `undefined` / `false`
 * when the session or snapshot is not the tenant's (404); `UNSUPPORTED` on a provider without them.
 */
export interface SnapshotService {
  create(tenant: string, sessionId: string, opts?: CaptureOptions): Promise<SnapshotView | undefined>
  list(tenant: string): Promise<SnapshotView[]>
  get(tenant: string, id: string): Promise<SnapshotView | undefined>
  delete(tenant: string, id: string): Promise<boolean>
  /** A new session whose sandboxes start from the snapshot (`NOT_FOUND` when it is not the tenant's). */
  startSession(
    tenant: string,
    input: { id?: string; provider?: string; profile?: string; snapshot: string },
  ): Promise<SessionView>
  /** Snapshot of the session and `count` new sessions from it, in one call. */
  fork(
    tenant: string,
    sessionId: string,
    opts: { count: number; keepSnapshot: boolean; tmpfs?: boolean },
  ): Promise<ForkResult | undefined>
}
