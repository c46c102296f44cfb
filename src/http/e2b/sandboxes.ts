/**
 * The E2B view of our sessions: each E2B sandbox is one of our sessions (its id is the session id),
 * and this store keeps what E2B adds to it — template, metadata, environment, the lifetime its
 * timeout sets and the envd access token. When the lifetime ends the session is deleted (its sandbox
 * destroyed), as E2B kills a sandbox at its timeout.
 */
import { randomBytes } from 'node:crypto'

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
  readonly startedAt: Date
  endAt: Date
  /** Set once killed (or timed out): streams of its processes drop instead of ending. */
  killed?: boolean
  timer?: NodeJS.Timeout
}

/** What creating a sandbox records. */
export type NewE2BSandbox = Omit<E2BSandbox, 'sandboxId' | 'accessToken' | 'startedAt' | 'endAt' | 'timer'>

/** E2B sandboxes of this process, by id; `onExpire` deletes the session behind one. */
export class E2BSandboxStore {
  private readonly byId = new Map<string, E2BSandbox>()

  constructor(private readonly onExpire: (s: E2BSandbox) => Promise<void>) {}

  /** A fresh sandbox id (also its session id): `e2b-` and 20 hex digits. */
  static newId(): string {
    return `e2b-${randomBytes(10).toString('hex')}`
  }

  add(sandboxId: string, input: NewE2BSandbox, timeoutMs: number): E2BSandbox {
    const now = new Date()
    const s: E2BSandbox = {
      ...input,
      sandboxId,
      accessToken: randomBytes(24).toString('hex'),
      startedAt: now,
      endAt: now,
    }
    this.byId.set(sandboxId, s)
    this.setTimeout(s, timeoutMs)
    return s
  }

  /** The sandbox when it is `tenant`'s; another tenant's answers like an unknown id. */
  get(tenant: string, sandboxId: string): E2BSandbox | undefined {
    const s = this.byId.get(sandboxId)
    return s?.tenant === tenant ? s : undefined
  }

  /** The sandbox an envd call names, checked against its access token. */
  byToken(sandboxId: string, token: string | undefined): E2BSandbox | 'unknown' | 'bad-token' {
    const s = this.byId.get(sandboxId)
    if (!s) return 'unknown'
    return token === s.accessToken ? s : 'bad-token'
  }

  /** The tenant's sandboxes, newest first. */
  list(tenant: string): E2BSandbox[] {
    return [...this.byId.values()].filter((s) => s.tenant === tenant).reverse()
  }

  /** Sets the remaining lifetime to `ms` from now. */
  setTimeout(s: E2BSandbox, ms: number): void {
    if (s.timer) clearTimeout(s.timer)
    s.endAt = new Date(Date.now() + ms)
    s.timer = setTimeout(() => {
      this.remove(s.sandboxId)
      void this.onExpire(s)
    }, ms)
    s.timer.unref()
  }

  remove(sandboxId: string): E2BSandbox | undefined {
    const s = this.byId.get(sandboxId)
    if (!s) return undefined
    if (s.timer) clearTimeout(s.timer)
    s.killed = true
    this.byId.delete(sandboxId)
    return s
  }

  /** Forgets every sandbox (server shutdown); their sessions stay to the pool and reaper. */
  clear(): void {
    for (const s of this.byId.values()) if (s.timer) clearTimeout(s.timer)
    this.byId.clear()
  }
}
