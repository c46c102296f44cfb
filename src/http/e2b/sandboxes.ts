/**
 * The E2B view of our sessions: each E2B sandbox is one of our sessions (its id is the session id),
 * and this store keeps what E2B adds to it — template, metadata, environment, the lifetime its
 * timeout sets, the envd access token and the process table — in an {@link E2BState} (Redis in a
 * fleet, so every API replica answers for every sandbox). When the lifetime ends the session is
 * deleted (its sandbox destroyed), as E2B kills a sandbox at its timeout: every process that uses
 * the store sweeps for ended lifetimes, and the one that removes a record deletes its session.
 */
import { randomBytes } from 'node:crypto'
import type { E2BRecord, E2BState } from '../../services/e2b/state.js'
import { signatureMatches, wellFormed, type SignedFileRequest } from './file-signature.js'

/** One E2B sandbox: a session of `tenant` plus E2B's attributes. */
export interface E2BSandbox {
  readonly sandboxId: string
  readonly tenant: string
  readonly templateId: string
  readonly profile: string
  readonly provider: string
  /** The sandbox's working directory (envd's: the user's home): relative file paths resolve against it. */
  readonly cwd: string
  readonly metadata: Record<string, string>
  readonly envVars: Record<string, string>
  /** The `X-Access-Token` envd calls must carry. */
  readonly accessToken: string
  /** What a request to a port through the sandbox's host name must carry (unset: public, as E2B's default). */
  readonly trafficAccessToken?: string
  /** The `Host` its ports see through its host name (`${PORT}`: the port); unset: the host name itself. */
  readonly maskRequestHost?: string
  /** Paused by E2B's pause: frozen until connect (or resume) thaws it. */
  paused?: boolean
  /** The provider's id of the sandbox the pause froze. */
  pausedSandbox?: string
  /** The pause in force ended the processes (filesystem-only). */
  pausedFilesystemOnly?: boolean
  /** `pause`: the end of the lifetime pauses the sandbox instead of killing it (create's `autoPause`). */
  readonly onTimeout?: 'kill' | 'pause'
  /** The auto-pause is filesystem-only (`autoPauseMemory: false`). */
  readonly autoPauseFilesystemOnly?: boolean
  /** Traffic to its host name resumes it when paused (`autoResume`). */
  readonly autoResume?: boolean
  /** The lifetime create asked for (ms), which an auto-resume gives again. */
  readonly timeoutMs?: number
  readonly startedAt: Date
  endAt: Date
}

/** What creating a sandbox records. */
export type NewE2BSandbox = Omit<
  E2BSandbox,
  | 'sandboxId'
  | 'accessToken'
  | 'trafficAccessToken'
  | 'paused'
  | 'pausedSandbox'
  | 'pausedFilesystemOnly'
  | 'timeoutMs'
  | 'startedAt'
  | 'endAt'
> & {
  /** Whether ports answer through the sandbox's host name without a traffic token. @default true */
  publicTraffic?: boolean
}

/** How often each process looks for sandboxes whose lifetime ended (ms). */
const SWEEP_MS = 1_000

const sandboxOf = (r: E2BRecord): E2BSandbox => ({
  ...r,
  startedAt: new Date(r.startedAt),
  endAt: new Date(r.endAt),
})
const recordOf = (s: E2BSandbox): E2BRecord => ({
  ...s,
  startedAt: s.startedAt.getTime(),
  endAt: s.endAt.getTime(),
})

/**
 * E2B sandboxes by id; `onExpire` deletes the session behind one whose lifetime ended, and
 * `onPauseAtTimeout` pauses one created with `onTimeout: 'pause'` instead (its failure falls back to
 * `onExpire`: a sandbox that cannot be paused is killed, as without the policy).
 */
export class E2BSandboxStore {
  /** Sandboxes removed (killed or timed out) by this process: their streams drop at once. */
  private readonly removed = new Set<string>()
  private readonly sweeper: NodeJS.Timeout
  /** Sandboxes this process is pausing at their timeout (a pause outlasts a sweep period). */
  private readonly pausing = new Set<string>()

  constructor(
    private readonly state: E2BState,
    private readonly onExpire: (s: E2BSandbox) => Promise<void>,
    private readonly onPauseAtTimeout?: (s: E2BSandbox) => Promise<void>,
  ) {
    this.sweeper = setInterval(() => void this.sweep().catch(() => undefined), SWEEP_MS)
    this.sweeper.unref()
  }

  /** A fresh sandbox id (also its session id): `e2b-` and 20 hex digits. */
  static newId(): string {
    return `e2b-${randomBytes(10).toString('hex')}`
  }

  async add(sandboxId: string, input: NewE2BSandbox, timeoutMs: number): Promise<E2BSandbox> {
    const now = new Date()
    const { publicTraffic = true, ...rest } = input
    const s: E2BSandbox = {
      ...rest,
      sandboxId,
      timeoutMs,
      accessToken: randomBytes(24).toString('hex'),
      ...(publicTraffic ? {} : { trafficAccessToken: randomBytes(24).toString('hex') }),
      startedAt: now,
      endAt: new Date(now.getTime() + timeoutMs),
    }
    await this.state.put(recordOf(s))
    return s
  }

  /** The sandbox when it is `tenant`'s; another tenant's answers like an unknown id. */
  async get(tenant: string, sandboxId: string): Promise<E2BSandbox | undefined> {
    const r = await this.state.get(sandboxId)
    return r?.tenant === tenant ? sandboxOf(r) : undefined
  }

  /** The sandbox an envd call names, checked against its access token. */
  async byToken(sandboxId: string, token: string | undefined): Promise<E2BSandbox | 'unknown' | 'bad-token'> {
    const r = await this.state.get(sandboxId)
    if (!r) return 'unknown'
    return token === r.accessToken ? sandboxOf(r) : 'bad-token'
  }

  /**
   * The sandbox whose access token signed `req` (a signed `/files` URL that names no sandbox: the
   * SDK's form when `E2B_SANDBOX_URL` is set). Every record is tried, any tenant's: the signature is
   * the credential, and only the token's holder can make it.
   */
  async bySignature(req: SignedFileRequest): Promise<E2BSandbox | undefined> {
    if (!wellFormed(req)) return undefined
    const r = (await this.state.all()).find((x) => signatureMatches(req, x.accessToken))
    return r ? sandboxOf(r) : undefined
  }

  /** The sandbox of any tenant (a request through its host name, whose id and token are the credentials). */
  async byId(sandboxId: string): Promise<E2BSandbox | undefined> {
    const r = await this.state.get(sandboxId)
    return r ? sandboxOf(r) : undefined
  }

  /** The tenant's sandboxes, newest first. */
  async list(tenant: string): Promise<E2BSandbox[]> {
    const all = await this.state.list(tenant)
    return all
      .sort((a, b) => b.startedAt - a.startedAt || (a.sandboxId < b.sandboxId ? 1 : -1))
      .map(sandboxOf)
  }

  /** Sets the remaining lifetime to `ms` from now. */
  async setTimeout(s: E2BSandbox, ms: number): Promise<void> {
    s.endAt = new Date(Date.now() + ms)
    await this.state.put(recordOf(s))
  }

  /**
   * Marks the sandbox paused (its lifetime then ends `ms` from now: a paused sandbox is kept that
   * long) or running again with `ms` of lifetime.
   */
  async setPaused(
    s: E2BSandbox,
    paused: boolean,
    ms: number,
    sandbox?: string,
    filesystemOnly = false,
  ): Promise<void> {
    if (paused) s.paused = true
    else delete s.paused
    if (paused && sandbox) s.pausedSandbox = sandbox
    else delete s.pausedSandbox
    if (paused && filesystemOnly) s.pausedFilesystemOnly = true
    else delete s.pausedFilesystemOnly
    s.endAt = new Date(Date.now() + ms)
    await this.state.put(recordOf(s))
  }

  /** Removes the sandbox's E2B side; `true` for the call that removed it. */
  async remove(sandboxId: string): Promise<boolean> {
    this.removed.add(sandboxId)
    setTimeout(() => this.removed.delete(sandboxId), 60_000).unref()
    return this.state.delete(sandboxId)
  }

  /** Whether the sandbox was killed or timed out (its process streams then drop). */
  async gone(sandboxId: string): Promise<boolean> {
    if (this.removed.has(sandboxId)) return true
    return (await this.state.get(sandboxId).catch(() => undefined)) === undefined
  }

  /** The sandbox's process table (envd pid → the process RPC's JSON entry). */
  processes(sandboxId: string): Promise<Map<number, string>> {
    return this.state.processes(sandboxId)
  }
  setProcess(sandboxId: string, pid: number, entry: string): Promise<void> {
    return this.state.setProcess(sandboxId, pid, entry)
  }
  deleteProcess(sandboxId: string, pid: number): Promise<void> {
    return this.state.deleteProcess(sandboxId, pid)
  }

  /**
   * Ends the lifetimes that are over: the process that removes a record deletes its session; a
   * running sandbox created with `onTimeout: 'pause'` is paused instead.
   */
  async sweep(now = Date.now()): Promise<void> {
    for (const id of await this.state.due(now)) {
      const r = await this.state.get(id)
      if (!r || r.endAt > now || this.pausing.has(id)) continue
      if (r.onTimeout === 'pause' && !r.paused && this.onPauseAtTimeout) {
        this.pausing.add(id)
        try {
          await this.onPauseAtTimeout(sandboxOf(r))
          continue
        } catch {
          // Not pausable after all (its sandbox is gone, the engine refused): killed, as by default.
        } finally {
          this.pausing.delete(id)
        }
      }
      if (await this.remove(id)) await this.onExpire(sandboxOf(r))
    }
  }

  /** Stops sweeping (server shutdown); the sandboxes stay, for the other processes or a restart. */
  close(): void {
    clearInterval(this.sweeper)
  }
}
