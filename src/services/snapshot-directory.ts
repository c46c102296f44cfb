import type { Redis } from 'ioredis'
import { AppError } from '../errors.js'

/** The API-level record of a snapshot (its data lives in the provider: image and workspace copy). */
export interface SnapshotRecord {
  id: string
  tenant: string
  provider: string
  /** Profile of the session it was taken from (sessions started from it default to it). */
  profile: string
  /** Session it was taken from. */
  sessionId: string
  createdAt: number
  /**
   * `creating` while the provider captures it; `ready` once it can start sessions. `failed` is
   * never stored: a record still `creating` past the bound reads as failed (see snapshot-service.ts).
   */
  state: 'creating' | 'ready' | 'failed'
  /** Bytes of the captured workspace (0 while creating). */
  workspaceBytes: number
  /** Why a `failed` snapshot failed. */
  reason?: string
  /** The name it was given. */
  name?: string
  /**
   * `tmpfs`: it holds the files of a sandbox's in-memory mounts (no persistent workspace); sessions
   * started from it need a profile without one. `sandbox`: it is the whole sandbox (E2B's), same
   * rule. Absent: a persistent workspace.
   */
  layout?: 'tmpfs' | 'sandbox'
  /**
   * The Docker engine holding its image and workspace copy (`queue.engineRouting`): sessions start
   * from it only there. Absent: taken without engine routing (or on a provider without engines).
   */
  engineId?: string
}

/**
 * Tenant-scoped snapshot records, counted against a per-tenant quota. In memory for the embedded
 * mode, in Redis (one hash per tenant) for a fleet, so every API process sees the same.
 */
export interface SnapshotDirectory {
  /** Adds the record unless the tenant holds `max` already (then `QUOTA_EXCEEDED`), atomically. */
  add(record: SnapshotRecord, max: number): Promise<void>
  /** Replaces an existing record (no-op when it was deleted meanwhile). */
  update(record: SnapshotRecord): Promise<void>
  get(tenant: string, id: string): Promise<SnapshotRecord | undefined>
  list(tenant: string): Promise<SnapshotRecord[]>
  delete(tenant: string, id: string): Promise<boolean>
  /** Tenants that hold snapshot records (for the sweep of stale ones). */
  tenants(): Promise<string[]>
  /**
   * Deletes the tenant's record and, in the same step, notes its data as left on its engine
   * (`record.engineId`): a process there removes it later ({@link leftovers}). Resolves `false`
   * when the tenant held no such record.
   */
  leaveOnEngine(record: SnapshotRecord & { engineId: string }): Promise<boolean>
  /** Snapshots deleted while their engine could not be reached: their data is still on `engineId`. */
  leftovers(engineId: string): Promise<SnapshotRecord[]>
  /** Forgets a leftover once its data is gone from its engine. */
  forgetLeftover(engineId: string, id: string): Promise<void>
}

function quotaFull(tenant: string, max: number): AppError {
  return new AppError(
    'QUOTA_EXCEEDED',
    `tenant '${tenant}' holds ${max} snapshots, its quota (quotas.maxSnapshots); delete some with DELETE /v1/snapshots/{id} or raise the quota`,
  )
}

/** In-process directory (embedded mode). */
export class MemorySnapshotDirectory implements SnapshotDirectory {
  private readonly byTenant = new Map<string, Map<string, SnapshotRecord>>()

  private of(tenant: string): Map<string, SnapshotRecord> {
    let t = this.byTenant.get(tenant)
    if (!t) this.byTenant.set(tenant, (t = new Map()))
    return t
  }
  async add(record: SnapshotRecord, max: number): Promise<void> {
    const t = this.of(record.tenant)
    if (t.size >= max) throw quotaFull(record.tenant, max)
    t.set(record.id, record)
  }
  async update(record: SnapshotRecord): Promise<void> {
    const t = this.of(record.tenant)
    if (t.has(record.id)) t.set(record.id, record)
  }
  async get(tenant: string, id: string): Promise<SnapshotRecord | undefined> {
    return this.byTenant.get(tenant)?.get(id)
  }
  async list(tenant: string): Promise<SnapshotRecord[]> {
    return [...(this.byTenant.get(tenant)?.values() ?? [])].sort((a, b) => a.createdAt - b.createdAt)
  }
  async delete(tenant: string, id: string): Promise<boolean> {
    return this.byTenant.get(tenant)?.delete(id) ?? false
  }
  async tenants(): Promise<string[]> {
    return [...this.byTenant].filter(([, t]) => t.size > 0).map(([tenant]) => tenant)
  }
  private readonly left = new Map<string, Map<string, SnapshotRecord>>()
  async leaveOnEngine(record: SnapshotRecord & { engineId: string }): Promise<boolean> {
    if (!(await this.delete(record.tenant, record.id))) return false
    let onEngine = this.left.get(record.engineId)
    if (!onEngine) this.left.set(record.engineId, (onEngine = new Map()))
    onEngine.set(record.id, record)
    return true
  }
  async leftovers(engineId: string): Promise<SnapshotRecord[]> {
    return [...(this.left.get(engineId)?.values() ?? [])]
  }
  async forgetLeftover(engineId: string, id: string): Promise<void> {
    this.left.get(engineId)?.delete(id)
  }
}

/** Adds field ARGV[1] = ARGV[2] to hash KEYS[1] unless it has ARGV[3] fields already. */
const ADD_SCRIPT = `
if redis.call('hlen', KEYS[1]) >= tonumber(ARGV[3]) then return 0 end
redis.call('hset', KEYS[1], ARGV[1], ARGV[2])
return 1`

/** Replaces field ARGV[1] of hash KEYS[1] with ARGV[2] only if it exists. */
const UPDATE_SCRIPT = `
if redis.call('hexists', KEYS[1], ARGV[1]) == 1 then redis.call('hset', KEYS[1], ARGV[1], ARGV[2]) end
return 1`

/**
 * Moves field ARGV[1] of hash KEYS[1] (the tenant's records) to hash KEYS[2] (an engine's
 * leftovers) with value ARGV[2]; returns 0 when KEYS[1] has no such field.
 */
const LEAVE_SCRIPT = `
if redis.call('hdel', KEYS[1], ARGV[1]) == 0 then return 0 end
redis.call('hset', KEYS[2], ARGV[1], ARGV[2])
return 1`

/**
 * Redis directory: hash `<prefix>snapshots:<tenant>` of id → JSON record, and hash
 * `<prefix>snapshot-leftovers:<engine>` of the records deleted while their engine was away.
 */
export class RedisSnapshotDirectory implements SnapshotDirectory {
  constructor(
    private readonly redis: Redis,
    private readonly prefix: string,
  ) {}

  private key(tenant: string): string {
    return `${this.prefix}snapshots:${tenant}`
  }
  async add(record: SnapshotRecord, max: number): Promise<void> {
    const ok = await this.redis.eval(
      ADD_SCRIPT,
      1,
      this.key(record.tenant),
      record.id,
      JSON.stringify(record),
      max,
    )
    if (ok !== 1) throw quotaFull(record.tenant, max)
  }
  async update(record: SnapshotRecord): Promise<void> {
    await this.redis.eval(UPDATE_SCRIPT, 1, this.key(record.tenant), record.id, JSON.stringify(record))
  }
  async get(tenant: string, id: string): Promise<SnapshotRecord | undefined> {
    const raw = await this.redis.hget(this.key(tenant), id)
    return raw ? (JSON.parse(raw) as SnapshotRecord) : undefined
  }
  async list(tenant: string): Promise<SnapshotRecord[]> {
    const all = await this.redis.hvals(this.key(tenant))
    return all.map((r) => JSON.parse(r) as SnapshotRecord).sort((a, b) => a.createdAt - b.createdAt)
  }
  async delete(tenant: string, id: string): Promise<boolean> {
    return (await this.redis.hdel(this.key(tenant), id)) === 1
  }
  private leftoverKey(engineId: string): string {
    return `${this.prefix}snapshot-leftovers:${engineId}`
  }
  async leaveOnEngine(record: SnapshotRecord & { engineId: string }): Promise<boolean> {
    const moved = await this.redis.eval(
      LEAVE_SCRIPT,
      2,
      this.key(record.tenant),
      this.leftoverKey(record.engineId),
      record.id,
      JSON.stringify(record),
    )
    return moved === 1
  }
  async leftovers(engineId: string): Promise<SnapshotRecord[]> {
    return (await this.redis.hvals(this.leftoverKey(engineId))).map((r) => JSON.parse(r) as SnapshotRecord)
  }
  async forgetLeftover(engineId: string, id: string): Promise<void> {
    await this.redis.hdel(this.leftoverKey(engineId), id)
  }
  async tenants(): Promise<string[]> {
    const head = `${this.prefix}snapshots:`
    const found = new Set<string>()
    let cursor = '0'
    do {
      const [next, keys] = await this.redis.scan(cursor, 'MATCH', `${head}*`, 'COUNT', 200)
      cursor = next
      for (const k of keys) found.add(k.slice(head.length))
    } while (cursor !== '0')
    return [...found]
  }
}
