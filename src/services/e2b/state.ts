/**
 * Where the E2B side of our sessions is kept: each sandbox's record (template, metadata, lifetime,
 * access token) and its process table (envd pid → our process). In memory for one process; in Redis
 * for a fleet, so that any API replica answers for any E2B sandbox — a `Sandbox.connect`, an envd
 * call or a `commands.connect(pid)` may reach another replica than the create did.
 */
import type { Redis } from 'ioredis'

/** One E2B sandbox as stored: a session of `tenant` plus E2B's attributes (times in epoch ms). */
export interface E2BRecord {
  sandboxId: string
  tenant: string
  templateId: string
  profile: string
  provider: string
  /** The sandbox's working directory (envd's: the user's home): relative file paths resolve against it. */
  cwd: string
  metadata: Record<string, string>
  envVars: Record<string, string>
  /** The `X-Access-Token` envd calls must carry. */
  accessToken: string
  /**
   * The `e2b-traffic-access-token` a request to one of the sandbox's ports through its host name
   * (`getHost`) must carry: set when create asked `network.allowPublicTraffic: false`.
   */
  trafficAccessToken?: string
  /**
   * The `Host` a request through the sandbox's host name carries to its port (`network.maskRequestHost`,
   * `${PORT}` standing for the port); unset: the host name it came with, as E2B's proxy sends it.
   */
  maskRequestHost?: string
  /** Paused (E2B's pause): envd and ports answer 502 until connect resumes it. */
  paused?: boolean
  /** The provider's id of the sandbox the pause froze (resume checks it is still the session's). */
  pausedSandbox?: string
  /**
   * What happens at the end of the lifetime (E2B's `lifecycle.onTimeout`, create's `autoPause`):
   * `pause` pauses the sandbox instead of killing it. Absent: `kill`.
   */
  onTimeout?: 'kill' | 'pause'
  /** The auto-pause drops the processes and keeps the files (`autoPauseMemory: false`). */
  autoPauseFilesystemOnly?: boolean
  /** A request to one of its ports through its host name resumes it when paused (`autoResume`). */
  autoResume?: boolean
  /** The lifetime create asked for (ms): an auto-resume gives the sandbox this much again. */
  timeoutMs?: number
  /** The pause in force dropped the processes (filesystem-only: `keepMemory: false`). */
  pausedFilesystemOnly?: boolean
  startedAt: number
  endAt: number
}

/** The E2B side of sessions, shared by every API process that uses the same store. */
export interface E2BState {
  /** Stores (or replaces) a record. */
  put(record: E2BRecord): Promise<void>
  get(sandboxId: string): Promise<E2BRecord | undefined>
  /** Every record of `tenant`. */
  list(tenant: string): Promise<E2BRecord[]>
  /** Every record of every tenant (a signed `/files` URL that names no sandbox is matched against them). */
  all(): Promise<E2BRecord[]>
  /** Deletes a record and its process table; `true` only for the call that removed it. */
  delete(sandboxId: string): Promise<boolean>
  /** Ids of the records whose lifetime ended by `now`. */
  due(now: number): Promise<string[]>
  /** Records process `pid` of a sandbox (`entry`: what the process RPC keeps, as JSON). */
  setProcess(sandboxId: string, pid: number, entry: string): Promise<void>
  processes(sandboxId: string): Promise<Map<number, string>>
  deleteProcess(sandboxId: string, pid: number): Promise<void>
}

/** {@link E2BState} of one process (embedded mode). */
export class MemoryE2BState implements E2BState {
  private readonly records = new Map<string, E2BRecord>()
  private readonly procs = new Map<string, Map<number, string>>()

  async put(record: E2BRecord): Promise<void> {
    this.records.set(record.sandboxId, { ...record })
  }
  async get(sandboxId: string): Promise<E2BRecord | undefined> {
    const r = this.records.get(sandboxId)
    return r ? { ...r } : undefined
  }
  async list(tenant: string): Promise<E2BRecord[]> {
    return [...this.records.values()].filter((r) => r.tenant === tenant).map((r) => ({ ...r }))
  }
  async all(): Promise<E2BRecord[]> {
    return [...this.records.values()].map((r) => ({ ...r }))
  }
  async delete(sandboxId: string): Promise<boolean> {
    this.procs.delete(sandboxId)
    return this.records.delete(sandboxId)
  }
  async due(now: number): Promise<string[]> {
    return [...this.records.values()].filter((r) => r.endAt <= now).map((r) => r.sandboxId)
  }
  async setProcess(sandboxId: string, pid: number, entry: string): Promise<void> {
    let m = this.procs.get(sandboxId)
    if (!m) this.procs.set(sandboxId, (m = new Map()))
    m.set(pid, entry)
  }
  async processes(sandboxId: string): Promise<Map<number, string>> {
    return new Map(this.procs.get(sandboxId) ?? [])
  }
  async deleteProcess(sandboxId: string, pid: number): Promise<void> {
    this.procs.get(sandboxId)?.delete(pid)
  }
}

/**
 * {@link E2BState} in Redis under `prefix`: hash `sandboxes` (id → JSON record), sorted set `ends`
 * (id by end of lifetime) and one hash `procs:<id>` per sandbox (pid → JSON entry).
 */
export class RedisE2BState implements E2BState {
  constructor(
    private readonly redis: Redis,
    private readonly prefix: string,
  ) {}

  private get records(): string {
    return `${this.prefix}sandboxes`
  }
  private get ends(): string {
    return `${this.prefix}ends`
  }
  private procsKey(sandboxId: string): string {
    return `${this.prefix}procs:${sandboxId}`
  }

  async put(record: E2BRecord): Promise<void> {
    await this.redis
      .multi()
      .hset(this.records, record.sandboxId, JSON.stringify(record))
      .zadd(this.ends, record.endAt, record.sandboxId)
      .exec()
  }
  async get(sandboxId: string): Promise<E2BRecord | undefined> {
    const raw = await this.redis.hget(this.records, sandboxId)
    return raw ? (JSON.parse(raw) as E2BRecord) : undefined
  }
  async list(tenant: string): Promise<E2BRecord[]> {
    return (await this.all()).filter((r) => r.tenant === tenant)
  }
  async all(): Promise<E2BRecord[]> {
    return (await this.redis.hvals(this.records)).map((r) => JSON.parse(r) as E2BRecord)
  }
  async delete(sandboxId: string): Promise<boolean> {
    const res = await this.redis
      .multi()
      .hdel(this.records, sandboxId)
      .zrem(this.ends, sandboxId)
      .del(this.procsKey(sandboxId))
      .exec()
    return res?.[0]?.[1] === 1
  }
  async due(now: number): Promise<string[]> {
    return this.redis.zrangebyscore(this.ends, '-inf', now, 'LIMIT', 0, 100)
  }
  async setProcess(sandboxId: string, pid: number, entry: string): Promise<void> {
    await this.redis.hset(this.procsKey(sandboxId), String(pid), entry)
  }
  async processes(sandboxId: string): Promise<Map<number, string>> {
    const all = await this.redis.hgetall(this.procsKey(sandboxId))
    return new Map(Object.entries(all).map(([pid, entry]) => [Number(pid), entry]))
  }
  async deleteProcess(sandboxId: string, pid: number): Promise<void> {
    await this.redis.hdel(this.procsKey(sandboxId), String(pid))
  }
}
