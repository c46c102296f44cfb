import type { Redis } from 'ioredis'
import { createHash } from 'node:crypto'
import { z } from 'zod'
import type { ExecJob } from '../schemas.js'
import { keyspace } from '../../redis/index.js'

/**
 * What a worker reports about its engine every heartbeat. Several workers beside one engine write
 * the same record (the last writer wins; they see the same engine); each worker's gateway URL is
 * also kept apart ({@link EngineDirectory.gateways}).
 */
export const EngineRecordSchema = z.object({
  /** When a worker last reached the engine (ms since epoch). */
  seenAt: z.number(),
  /** The engine answered its last ping. */
  healthy: z.boolean(),
  /** Sandboxes of this scope running on the engine. */
  running: z.number().int().min(0),
  /** The engine's sandbox cap (`providers.docker.maxSandboxes`); absent: unbounded. */
  cap: z.number().int().positive().optional(),
  /**
   * Memory the engine's sandboxes may reserve, in bytes: `providers.docker.memoryCapacityMb`, else the
   * engine's own memory (`docker info` MemTotal), which only weighs placement. Absent: placement does
   * not look at memory.
   */
  memoryBytes: z.number().int().positive().optional(),
  /** `memoryBytes` was configured (`providers.docker.memoryCapacityMb`): past it, no new session goes there. */
  memoryStrict: z.boolean().optional(),
  /** The memory limits of this scope's sandboxes on the engine, summed (bytes). */
  reservedBytes: z.number().int().min(0).optional(),
  /** The worker that wrote the record. */
  workerId: z.string(),
  /** Why the last ping failed. */
  reason: z.string().optional(),
  /**
   * The internal gateway of the worker that wrote the record (`fleet.gateway`). API processes send
   * the engine's calls to any live worker's gateway ({@link EngineDirectory.gateways}); this one is
   * the fallback when none renewed its own entry. Absent: no gateway (no `fleet.secret`).
   */
  gatewayUrl: z.string().optional(),
})

/** What a worker reports about its engine. */
export type EngineRecord = z.output<typeof EngineRecordSchema>

/** An engine as `/v1/providers`, `/metrics` and `sbx engine ls` show it. */
export interface EngineView extends EngineRecord {
  readonly id: string
  /** `live`: reached by a worker within the staleness window and healthy; `down` otherwise. */
  readonly state: 'live' | 'down'
  /** `sbx engine drain <id>`: no new sessions go there. */
  readonly draining: boolean
}

/** Where {@link EngineDirectory.route} sent a job. */
export type EngineRoute =
  /** The lane (engine) the job goes to, and the engine the session left when it was re-placed. */
  | { readonly engineId: string; readonly previous?: string; readonly how: 'job' | 'kept' | 'placed' }
  /** No live engine with room. */
  | { readonly none: true; readonly live: number }

/**
 * One step, atomically: a job already routed keeps its lane (a resubmission reaches the same job);
 * a session placed on a live, undrained engine stays there; otherwise the session (or an ephemeral
 * call) goes to the live, healthy, undrained engine with room and the lowest load. Load is counted
 * twice, and the higher share decides: sandboxes (the running ones it reported plus the sessions
 * placed on it in the last `pendingMs`) against its cap, and memory (the limits it reported reserved,
 * plus `wantBytes` for each recent placement and for this one) against its capacity. An engine has
 * room while its sandboxes stay under the cap and, where its capacity was configured
 * (`memoryStrict`), its memory within it.
 */
const ROUTE_SCRIPT = `
local now = tonumber(ARGV[1])
local staleMs = tonumber(ARGV[2])
local retentionMs = ARGV[3]
local placeTtlMs = tonumber(ARGV[4])
local session = ARGV[5]
local loadPrefix = ARGV[6]
local pendingMs = tonumber(ARGV[7])
local wantBytes = tonumber(ARGV[8]) or 0
local hasJob = ARGV[9] == '1'
if hasJob then
  local existing = redis.call('GET', KEYS[3])
  if existing then return {existing, '', 'job'} end
end
local function live(id)
  if redis.call('SISMEMBER', KEYS[2], id) == 1 then return nil end
  local raw = redis.call('HGET', KEYS[1], id)
  if not raw then return nil end
  local ok, e = pcall(cjson.decode, raw)
  if not ok or type(e) ~= 'table' then return nil end
  if e.healthy ~= true or (now - tonumber(e.seenAt)) > staleMs then return nil end
  return e
end
local previous = ''
if session ~= '' then
  local cur = redis.call('GET', KEYS[4])
  if cur then
    if live(cur) then
      redis.call('PEXPIRE', KEYS[4], placeTtlMs)
      if hasJob then redis.call('SET', KEYS[3], cur, 'PX', retentionMs) end
      return {cur, '', 'kept'}
    end
    previous = cur
  end
end
local best, bestScore, liveCount = nil, nil, 0
local ids = redis.call('HKEYS', KEYS[1])
table.sort(ids)
for _, id in ipairs(ids) do
  local e = live(id)
  if e then
    liveCount = liveCount + 1
    local key = loadPrefix .. id
    redis.call('ZREMRANGEBYSCORE', key, '-inf', now - pendingMs)
    local pending = redis.call('ZCARD', key)
    local load = (tonumber(e.running) or 0) + pending
    local cap = tonumber(e.cap)
    local mem = tonumber(e.memoryBytes)
    local memLoad = (tonumber(e.reservedBytes) or 0) + (pending + 1) * wantBytes
    if (cap == nil or load < cap) and (mem == nil or e.memoryStrict ~= true or memLoad <= mem) then
      local score = load / (cap or 1000000)
      if mem ~= nil and memLoad / mem > score then score = memLoad / mem end
      if bestScore == nil or score < bestScore then best, bestScore = id, score end
    end
  end
end
if best == nil then return {'', '', 'none', tostring(liveCount)} end
if session ~= '' then
  redis.call('SET', KEYS[4], best, 'PX', placeTtlMs)
  redis.call('ZADD', loadPrefix .. best, now, session)
end
if hasJob then redis.call('SET', KEYS[3], best, 'PX', retentionMs) end
return {best, previous, 'placed'}
`

/** Options of {@link EngineDirectory}. */
export interface EngineDirectoryOptions {
  /** Key prefix (the queue prefix). */
  readonly prefix: string
  /** An engine not reached for this long is down (ms). @default 3000 */
  readonly staleMs?: number
  /** How long a job's lane is remembered: the queue's retention (ms). @default 3600000 */
  readonly retentionMs?: number
  /** How long a session's placement outlives its last call (ms). @default 86400000 */
  readonly placeTtlMs?: number
}

/**
 * The fleet's engines in Redis: heartbeats of the workers beside them, drained engines, where each
 * session is placed and which lane each job went to. Keys: `<prefix>:engines` (hash of
 * {@link EngineRecord}s), `<prefix>:engines:drained` (set), `<prefix>:engines:place:<session>`,
 * `<prefix>:engines:pending:<engine>` (recent placements), `<prefix>:engines:job:<jobId>`,
 * `<prefix>:engines:adopt:<engine>` (the worker serving a down engine's lane),
 * `<prefix>:engines:gateways:<engine>` (sorted set: each worker's gateway URL by its last heartbeat).
 */
export class EngineDirectory {
  readonly staleMs: number
  private readonly retentionMs: number
  private readonly placeTtlMs: number
  private readonly k: string

  constructor(
    private readonly redis: Redis,
    opts: EngineDirectoryOptions,
  ) {
    this.k = keyspace(opts.prefix).engines
    this.staleMs = opts.staleMs ?? 3_000
    this.retentionMs = opts.retentionMs ?? 3_600_000
    this.placeTtlMs = opts.placeTtlMs ?? 86_400_000
  }

  /**
   * Routes a job to an engine's lane (see the script above); `wantBytes` is the memory limit a new
   * sandbox of the job's profile takes (0: placement by sandbox count only).
   */
  async route(job: ExecJob, now = Date.now(), wantBytes = 0): Promise<EngineRoute> {
    const session = job.sessionId === undefined ? '' : placementOf(job)
    return this.run(session, job.jobId, now, wantBytes)
  }

  /**
   * Where a session's sandbox lives, for a call that is not a job (its files, processes, code): the
   * engine it is placed on while that engine is live and undrained, else a new placement exactly as
   * {@link route} makes for the session's next job (so the call and the jobs agree).
   */
  async place(session: SessionPlacement, now = Date.now(), wantBytes = 0): Promise<EngineRoute> {
    return this.run(placementOf(session), undefined, now, wantBytes)
  }

  /**
   * Places a session on `engineId` (a session started from a snapshot, which is an image on that
   * engine): its calls and jobs then go there while the engine is live and undrained, as for any
   * placement.
   */
  async pin(session: SessionPlacement, engineId: string): Promise<void> {
    await this.redis.set(`${this.k}:place:${placementOf(session)}`, engineId, 'PX', this.placeTtlMs)
  }

  /** One engine's record as its workers last wrote it, with its state; undefined when unknown. */
  async engine(engineId: string, now = Date.now()): Promise<EngineView | undefined> {
    const [raw, drained] = await Promise.all([
      this.redis.hget(this.k, engineId),
      this.redis.sismember(`${this.k}:drained`, engineId),
    ])
    if (raw === null) return undefined
    const parsed = EngineRecordSchema.safeParse(safeJson(raw))
    if (!parsed.success) return undefined
    const live = parsed.data.healthy && now - parsed.data.seenAt <= this.staleMs
    return { id: engineId, ...parsed.data, state: live ? 'live' : 'down', draining: drained === 1 }
  }

  private async run(
    session: string,
    jobId: string | undefined,
    now: number,
    wantBytes: number,
  ): Promise<EngineRoute> {
    const r = (await this.redis.eval(
      ROUTE_SCRIPT,
      4,
      this.k,
      `${this.k}:drained`,
      this.jobKey(jobId ?? '-'),
      session === '' ? `${this.k}:place:-` : `${this.k}:place:${session}`,
      now,
      this.staleMs,
      this.retentionMs,
      this.placeTtlMs,
      session,
      `${this.k}:pending:`,
      5_000,
      Math.max(0, Math.round(wantBytes)),
      jobId === undefined ? '0' : '1',
    )) as string[]
    const [engineId = '', previous = '', how = 'none', live = '0'] = r
    if (how === 'none') return { none: true, live: Number(live) }
    return {
      engineId,
      how: how as 'job' | 'kept' | 'placed',
      ...(previous !== '' && previous !== engineId ? { previous } : {}),
    }
  }

  /** The engine whose lane holds the job; undefined when unknown (never routed, or past retention). */
  async laneOf(jobId: string): Promise<string | undefined> {
    return (await this.redis.get(this.jobKey(jobId))) ?? undefined
  }

  /**
   * Writes a worker's heartbeat for its engine; a healthy one with a gateway also renews that
   * gateway's own entry (see {@link gateways}), so each worker of an engine is reachable by itself.
   */
  async beat(engineId: string, record: EngineRecord): Promise<void> {
    const m = this.redis.multi().hset(this.k, engineId, JSON.stringify(record))
    if (record.gatewayUrl !== undefined && record.healthy) {
      const key = this.gatewaysKey(engineId)
      // Entries long past the staleness window go; the key goes with the engine's last worker.
      const keepMs = Math.max(60_000, this.staleMs * 10)
      m.zadd(key, record.seenAt, record.gatewayUrl)
        .zremrangebyscore(key, '-inf', record.seenAt - keepMs)
        .pexpire(key, keepMs)
    }
    await m.exec()
  }

  /**
   * The gateways of the live workers of an engine: every URL a healthy heartbeat renewed within the
   * staleness window, newest first. A worker that died drops out once its last heartbeat is stale.
   */
  async gateways(engineId: string, now = Date.now()): Promise<string[]> {
    return this.redis.zrevrangebyscore(this.gatewaysKey(engineId), '+inf', now - this.staleMs)
  }

  /** Removes a gateway at once (its worker is stopping), before its entry goes stale. */
  async dropGateway(engineId: string, url: string): Promise<void> {
    await this.redis.zrem(this.gatewaysKey(engineId), url)
  }

  private gatewaysKey(engineId: string): string {
    return `${this.k}:gateways:${engineId}`
  }

  /** Every engine known, with its state. */
  async list(now = Date.now()): Promise<EngineView[]> {
    const [all, drained] = await Promise.all([
      this.redis.hgetall(this.k),
      this.redis.smembers(`${this.k}:drained`),
    ])
    const out: EngineView[] = []
    for (const [id, raw] of Object.entries(all)) {
      let parsed: EngineRecord
      try {
        parsed = EngineRecordSchema.parse(JSON.parse(raw))
      } catch {
        continue
      }
      const live = parsed.healthy && now - parsed.seenAt <= this.staleMs
      out.push({ id, ...parsed, state: live ? 'live' : 'down', draining: drained.includes(id) })
    }
    return out.sort((a, b) => a.id.localeCompare(b.id))
  }

  /** Drains (`true`) or undrains an engine. Returns whether the engine is known. */
  async setDraining(engineId: string, draining: boolean): Promise<boolean> {
    if (draining) await this.redis.sadd(`${this.k}:drained`, engineId)
    else await this.redis.srem(`${this.k}:drained`, engineId)
    return (await this.redis.hexists(this.k, engineId)) === 1
  }

  /** Forgets an engine (its record and drain mark), e.g. a host taken out for good. */
  async forget(engineId: string): Promise<void> {
    await this.redis.multi().hdel(this.k, engineId).srem(`${this.k}:drained`, engineId).exec()
  }

  /** Takes or renews the right to serve a down engine's lane; false when another worker holds it. */
  async adopt(engineId: string, workerId: string, ttlMs: number): Promise<boolean> {
    const r = await this.redis.eval(
      `local v = redis.call('GET', KEYS[1])
       if v == false then redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2]) return 1 end
       if v == ARGV[1] then redis.call('PEXPIRE', KEYS[1], ARGV[2]) return 1 end
       return 0`,
      1,
      `${this.k}:adopt:${engineId}`,
      workerId,
      ttlMs,
    )
    return r === 1
  }

  /** Gives up serving a down engine's lane. */
  async release(engineId: string, workerId: string): Promise<void> {
    await this.redis.eval(
      `if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0`,
      1,
      `${this.k}:adopt:${engineId}`,
      workerId,
    )
  }

  private jobKey(jobId: string): string {
    return `${this.k}:job:{${jobId}}`
  }
}

/** What places a session: its tenant, id, provider (or policy) and profile, as its jobs carry them. */
export type SessionPlacement = Pick<ExecJob, 'tenant' | 'sessionId' | 'providerId' | 'profile'>

/** The placement key of a job's session: a hash of (tenant, sessionId, providerId, profile). */
function placementOf(job: SessionPlacement): string {
  const parts = JSON.stringify([job.tenant, job.sessionId ?? null, job.providerId, job.profile])
  return createHash('sha256').update(parts).digest('hex').slice(0, 32)
}

/**
 * The BullMQ queue name of an engine's lane: `<queue>-<engine id>`, the id stripped of what queue
 * names may not hold (Docker's engine ids carry ':').
 */
export function laneName(queueName: string, engineId: string): string {
  return `${queueName}-${engineId.replace(/[^A-Za-z0-9_-]/g, '').toLowerCase()}`
}

function safeJson(raw: string): unknown {
  try {
    return JSON.parse(raw)
  } catch {
    return undefined
  }
}
