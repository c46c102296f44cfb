import type { Redis } from 'ioredis'
import { AppError } from '../errors.js'
import type { AlongsideWrite, SetIfAbsent } from '../queue/types.js'

/** The API-level record of a sandbox session (the sandbox binding itself lives in the session pool). */
export interface SessionRecord {
  id: string
  tenant: string
  provider: string
  profile: string
  createdAt: number
}

/**
 * Tenant-scoped session records: what `GET /v1/sessions` lists and `DELETE` removes. In memory for
 * the embedded mode, in Redis (one hash per tenant) for a fleet, so every API process sees the same.
 */
export interface SessionDirectory {
  /** Creates the record; an existing id of the same tenant is a CONFLICT unless `ifAbsent`. */
  create(record: SessionRecord, opts?: { ifAbsent?: boolean }): Promise<SessionRecord>
  get(tenant: string, id: string): Promise<SessionRecord | undefined>
  list(tenant: string): Promise<SessionRecord[]>
  delete(tenant: string, id: string): Promise<boolean>
  /** Creates the record unless one exists (which is kept); resolves with nothing, so it is one write. */
  ensure?(record: SessionRecord): Promise<void>
  /**
   * The write {@link ensure} makes, for a job queue on the same Redis to make with a job's add
   * (`JobQueue.submitOrGet`) instead of a round trip of its own (see {@link sessionRecordAlongside}).
   */
  ensureWrite?(record: SessionRecord): SetIfAbsent
}

function conflict(id: string): AppError {
  return new AppError('CONFLICT', `session ${id} already exists; pick another id or reuse it`)
}

/** In-process directory (embedded mode). */
export class MemorySessionDirectory implements SessionDirectory {
  private readonly byTenant = new Map<string, Map<string, SessionRecord>>()

  async create(record: SessionRecord, opts: { ifAbsent?: boolean } = {}): Promise<SessionRecord> {
    const t = this.byTenant.get(record.tenant) ?? new Map<string, SessionRecord>()
    this.byTenant.set(record.tenant, t)
    const existing = t.get(record.id)
    if (existing) {
      if (opts.ifAbsent) return existing
      throw conflict(record.id)
    }
    t.set(record.id, record)
    return record
  }
  async get(tenant: string, id: string): Promise<SessionRecord | undefined> {
    return this.byTenant.get(tenant)?.get(id)
  }
  async list(tenant: string): Promise<SessionRecord[]> {
    return [...(this.byTenant.get(tenant)?.values() ?? [])].sort((a, b) => a.createdAt - b.createdAt)
  }
  async delete(tenant: string, id: string): Promise<boolean> {
    return this.byTenant.get(tenant)?.delete(id) ?? false
  }
}

/** Redis directory: hash `<prefix>directory:<tenant>` of id → JSON record (src/redis/keyspace.ts). */
export class RedisSessionDirectory implements SessionDirectory {
  constructor(
    private readonly redis: Redis,
    private readonly prefix: string,
  ) {}

  private key(tenant: string): string {
    return `${this.prefix}directory:${tenant}`
  }

  async create(record: SessionRecord, opts: { ifAbsent?: boolean } = {}): Promise<SessionRecord> {
    const added = await this.redis.hsetnx(this.key(record.tenant), record.id, JSON.stringify(record))
    if (added === 1) return record
    if (!opts.ifAbsent) throw conflict(record.id)
    return (await this.get(record.tenant, record.id)) ?? record
  }
  async get(tenant: string, id: string): Promise<SessionRecord | undefined> {
    const raw = await this.redis.hget(this.key(tenant), id)
    return raw ? (JSON.parse(raw) as SessionRecord) : undefined
  }
  async list(tenant: string): Promise<SessionRecord[]> {
    const all = await this.redis.hvals(this.key(tenant))
    return all.map((r) => JSON.parse(r) as SessionRecord).sort((a, b) => a.createdAt - b.createdAt)
  }
  async delete(tenant: string, id: string): Promise<boolean> {
    return (await this.redis.hdel(this.key(tenant), id)) === 1
  }
  async ensure(record: SessionRecord): Promise<void> {
    const w = this.ensureWrite(record)
    await this.redis.hsetnx(w.key, w.field, w.value)
  }
  ensureWrite(record: SessionRecord): SetIfAbsent {
    return { key: this.key(record.tenant), field: record.id, value: JSON.stringify(record) }
  }
}

/**
 * Records a session that a routed call names implicitly (exec, tool call, agent run) so the API lists
 * and can delete it. No-op without a session id; an existing record is kept.
 */
export async function ensureSessionRecord(
  directory: SessionDirectory,
  tenant: string,
  sessionId: string | undefined,
  target: { provider: string; profile: string },
): Promise<void> {
  if (!sessionId) return
  await ensureRecord(directory, { id: sessionId, tenant, ...target, createdAt: Date.now() })
}

/** Creates the record unless one exists (which is kept). */
async function ensureRecord(directory: SessionDirectory, record: SessionRecord): Promise<void> {
  if (directory.ensure) await directory.ensure(record)
  else await directory.create(record, { ifAbsent: true })
}

/**
 * The session's record as the write that goes with a job's submission (`JobQueue.submitOrGet`
 * writes it whether the job is new or not): the directory's `HSETNX` for a queue on its Redis to
 * make with its add, and its own write for any other queue. Undefined without a session id.
 */
export function sessionRecordAlongside(
  directory: SessionDirectory,
  tenant: string,
  sessionId: string | undefined,
  target: { provider: string; profile: string },
): AlongsideWrite | undefined {
  if (!sessionId) return undefined
  const record = { id: sessionId, tenant, ...target, createdAt: Date.now() }
  const setIfAbsent = directory.ensureWrite?.(record)
  return {
    ...(setIfAbsent ? { setIfAbsent } : {}),
    write: () => ensureRecord(directory, record),
  }
}
